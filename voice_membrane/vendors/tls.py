"""One TLS context for every HTTP client of the process.

Building an ``ssl.SSLContext`` loads the CA bundle: ~25-35 ms of CPU on the
event loop, which each SDK client pays when it makes its own — even for
``http://`` on loopback. A server making a client per session paid it on every
session, stalling all the others (issue 11's load benchmark: half the server's
CPU). The context is made once, as httpx would make it, and shared: it is
read-only once built, and safe to use from many connections.
"""

from __future__ import annotations

import ssl
from functools import cache

import anyio
import httpx2


async def warm_http_stack() -> None:
    """Load what the first HTTP client of the process would: httpx's transport
    (whose import builds a default context of its own) and the shared context,
    in a worker thread, once per process. For a provider's ``start``: otherwise
    the first turn's request pays it (~40 ms on the event loop, stalling every
    other session of a fresh server process)."""
    if shared_ssl_context.cache_info().currsize:
        return  # loaded: no thread hop for every later session's start
    await anyio.to_thread.run_sync(_load_http_stack)


def _load_http_stack() -> None:
    import httpcore2  # noqa: F401  (imported for its side effect: loaded once)

    shared_ssl_context()


@cache
def shared_ssl_context() -> ssl.SSLContext:
    """The context an httpx client makes by default (certifi's CA bundle,
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` honoured), made once per process."""
    return httpx2.create_ssl_context()

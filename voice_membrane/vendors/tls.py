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

import httpx2


@cache
def shared_ssl_context() -> ssl.SSLContext:
    """The context an httpx client makes by default (certifi's CA bundle,
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` honoured), made once per process."""
    return httpx2.create_ssl_context()

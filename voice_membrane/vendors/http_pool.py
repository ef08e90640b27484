"""How long the vendors' SDK clients keep an idle connection.

The SDKs keep one for 5 s (httpx's default). A spoken turn's answer plays for
longer than that, so every next request to the LLM opened a new connection: a
TCP and TLS handshake (tens of ms to a vendor, more from afar) in front of the
first token of every turn. A minute covers a conversation's pauses and stays
under the vendors' own idle limits; a connection the server has closed is found
closed when taken from the pool, and a new one is opened.
"""

from __future__ import annotations

import httpx2

KEEPALIVE_S = 60.0


def pool_limits() -> httpx2.Limits:
    """The SDKs' own connection limits with a longer idle keep-alive."""
    return httpx2.Limits(
        max_connections=1000, max_keepalive_connections=100, keepalive_expiry=KEEPALIVE_S
    )

"""An httpx2 transport with one connection pool per event loop.

google-genai keeps one connection pool per running loop when it makes its own
transport; given ours (to stay on httpx2 where aiohttp is installed:
``gemini.py``), it would share that one pool across loops, and a client closed
under a later loop would close sockets of a loop already gone ("Event loop is
closed"). This transport keeps the SDK's rule: each loop its own pool, and a
close closes the current loop's (another loop's is dropped, as the SDK drops it).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2


class PerLoopTransport(httpx2.AsyncBaseTransport):
    def __init__(self, **pool_options: Any) -> None:
        self._options = pool_options  # (``AsyncHTTPTransport``'s: verify, …)
        self._pools: dict[asyncio.AbstractEventLoop, httpx2.AsyncHTTPTransport] = {}

    def _pool(self) -> httpx2.AsyncHTTPTransport:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            for gone in [old for old in self._pools if old.is_closed()]:
                del self._pools[gone]  # (its sockets go with it)
            pool = self._pools[loop] = httpx2.AsyncHTTPTransport(**self._options)
        return pool

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self._pool().handle_async_request(request)

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        pools, self._pools = self._pools, {}
        if loop in pools:
            await pools[loop].aclose()

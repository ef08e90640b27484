"""The Gemini adapter's transport keeps a connection pool per event loop: a
client used under one loop and closed under another never touches the first
loop's sockets (one shared pool does: "Event loop is closed")."""

from __future__ import annotations

import anyio
import httpx2
import pytest

from voice_membrane.providers.loop_pools import PerLoopTransport
from voice_membrane.testing.fake_openai import FakeOpenAI


async def request(transport: httpx2.AsyncBaseTransport, url: str) -> int:
    response = await transport.handle_async_request(httpx2.Request("GET", url))
    await response.aread()  # read whole: its connection goes back to the pool, kept alive
    await response.aclose()
    return response.status_code


def test_a_close_under_another_loop_leaves_the_first_loops_sockets_alone() -> None:
    with FakeOpenAI() as fake:
        url = fake.base_url + "/models"
        transport = PerLoopTransport()
        assert anyio.run(request, transport, url) > 0  # loop 1 (closed after)
        assert anyio.run(request, transport, url) > 0  # loop 2: a pool of its own
        anyio.run(transport.aclose)  # loop 3: closes its own, none of the others'


def test_one_shared_pool_is_what_fails() -> None:
    """(What the per-loop pools are for: the plain transport, shared.)"""
    with FakeOpenAI() as fake:
        transport = httpx2.AsyncHTTPTransport()
        anyio.run(request, transport, fake.base_url + "/models")
        with pytest.raises(RuntimeError, match="Event loop is closed"):
            anyio.run(transport.aclose)

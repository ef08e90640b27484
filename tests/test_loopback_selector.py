"""The fakes' event loop: epoll whose timeouts keep microseconds (a scripted
first token must not come a millisecond late), still reporting what is ready."""

import asyncio
import selectors
import socket
import threading

import httpx
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from voice_membrane.testing.loopback import LoopbackServer, MicrosecondSelector


def test_a_ready_socket_is_reported_and_a_wait_with_nothing_ready_times_out() -> None:
    a, b = socket.socketpair()
    with a, b, MicrosecondSelector() as selector:
        selector.register(a, selectors.EVENT_READ, "a")
        assert selector.select(0.0005) == []  # nothing to read: the timeout ends the wait
        # a long wait ends when the socket becomes readable, not at its timeout
        results: list[list[tuple[selectors.SelectorKey, int]]] = []
        waiter = threading.Thread(
            target=lambda: results.append(selector.select(600.0)), daemon=True
        )
        waiter.start()
        b.send(b"x")
        waiter.join(timeout=30.0)
        assert not waiter.is_alive(), "the wait did not end when the socket became readable"
        (ready,) = results
        assert [(key.data, events) for key, events in ready] == [("a", selectors.EVENT_READ)]
        assert selector.select(None) == ready  # (no timeout: plain epoll)


def test_the_loopback_server_runs_its_app_on_that_selector() -> None:
    seen: list[object] = []

    async def hello(_: object) -> PlainTextResponse:
        loop = asyncio.get_running_loop()
        seen.append(getattr(loop, "_selector", None))
        seen.append(threading.current_thread().name)
        return PlainTextResponse("hi")

    server = LoopbackServer("selector-check")
    port = server.start(Starlette(routes=[Route("/", hello)]))
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/").text == "hi"
    finally:
        server.stop()
    assert isinstance(seen[0], MicrosecondSelector)
    assert seen[1] == "selector-check"

"""An ASGI app served by uvicorn in a thread on 127.0.0.1, for the test servers
(``LoopbackApp``, their common start, stop and ``with``), and the TCP transport
under a connection of it (to cut one without a goodbye)."""

from __future__ import annotations

import asyncio
import select
import selectors
import socket
import threading
from types import TracebackType
from typing import Any, Literal, Self

import uvicorn

_SELECT_LIMIT = 1024  # select() takes descriptors below FD_SETSIZE only


class MicrosecondSelector(selectors.EpollSelector):
    """epoll, its timeouts kept to the microsecond. CPython hands epoll_wait
    whole milliseconds, rounded up, so a fake's scripted time (a first token
    due 300 ms after the request) came up to 1 ms late, and the benchmarks
    counted that as the pipeline's. A wait with a timeout is done by select()
    on the epoll descriptor itself (readable once any registered one is), which
    takes microseconds; the events are then read without waiting."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout > 0 and self.fileno() < _SELECT_LIMIT:
            select.select([self.fileno()], [], [], timeout)
            timeout = 0
        return super().select(timeout)


def _precise_loop() -> asyncio.AbstractEventLoop:
    return asyncio.SelectorEventLoop(MicrosecondSelector())


def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
    """``server.run`` on a loop whose timers keep time (``MicrosecondSelector``)."""
    with asyncio.Runner(loop_factory=_precise_loop) as runner:
        runner.run(server.serve(sockets=[sock]))


class LoopbackServer:
    """Serves one app on a free loopback port until ``stop()``."""

    def __init__(self, name: str, *, lifespan: Literal["on", "off"] = "off") -> None:
        self.name, self.lifespan = name, lifespan
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    def start(self, app: Any) -> int:
        """Serve ``app``; return the port once it accepts connections."""
        # IPPROTO_TCP named: asyncio then sets TCP_NODELAY on accepted connections.
        # Without it a reused connection waits ~40 ms (delayed ACK) before each
        # stream's first bytes, a pause no real API has.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._socket = sock
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            log_level="critical",  # a scripted drop is not an error worth printing
            access_log=False,
            interface="asgi3",  # (a bound method is not told apart from an ASGI2 class)
            lifespan=self.lifespan,
            timeout_graceful_shutdown=1,
            # as the vendors' front ends (minutes), not uvicorn's 5 s: a client's
            # idle keep-alive is then the client's to decide
            timeout_keep_alive=120,
        )
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=_serve, args=(server, sock), name=self.name, daemon=True
        )
        self._thread.start()
        while not server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"{self.name} failed to start")
            threading.Event().wait(0.005)
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None


class LoopbackApp:
    """A test server: its ``app()`` served on a free loopback port (``port``)
    from ``start()`` (or ``with``) until ``stop()``."""

    def __init__(self, name: str, *, lifespan: Literal["on", "off"] = "off") -> None:
        self._loopback = LoopbackServer(name, lifespan=lifespan)
        self.port = 0

    def app(self) -> Any:
        raise NotImplementedError

    def start(self) -> Self:
        self.port = self._loopback.start(self.app())
        return self

    def stop(self) -> None:
        self._loopback.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def tcp_transport(send: Any, depth: int = 4) -> asyncio.Transport | None:
    """The TCP transport under an ASGI ``send``: Starlette wraps uvicorn's bound
    ``asgi_send`` in closures, so follow ``__self__`` and closure cells a few
    levels. ASGI has no "abort", and a drop must not send a close frame."""
    owner = getattr(send, "__self__", None)
    transport = getattr(owner, "transport", None)
    if isinstance(transport, asyncio.Transport):
        return transport
    if depth == 0:
        return None
    for cell in getattr(send, "__closure__", None) or ():
        found = (
            tcp_transport(cell.cell_contents, depth - 1) if callable(cell.cell_contents) else None
        )
        if found is not None:
            return found
    return None

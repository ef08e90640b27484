"""A connection of the port that also takes one POST (the WebRTC offer) or
OPTIONS (its CORS preflight).

websockets rejects a POST before any hook of ours runs (its parser takes
GET only), so the connection looks at its first bytes: a request that starts
with ``POST `` or ``OPTIONS `` is read by ``http_post.PostIntake`` instead and
never reaches websockets' parser; anything else goes to websockets
untouched. The request is answered from websockets' own handler task, inside
its opening-handshake timeout, so a server closing cancels it as it cancels a
handshake; the connection then closes (websockets aborts the handshake it
never saw).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Response
from websockets.server import ServerProtocol

from .http_post import REQUEST_PREFIXES, Posted, PostIntake, reply_bytes
from .http_routes import SecureConnection, secure

PostHandler = Callable[[ServerConnection, Posted], Awaitable[Response]]
MAX_BODY = 64 * 1024  # an SDP offer is a few KB


def posting_connection(handler: PostHandler) -> type[SecureConnection]:
    """The connection class for ``serve(create_connection=…)`` whose POSTs and
    OPTIONS ``handler`` answers."""

    class PostingConnection(SecureConnection):
        def __init__(self, protocol: ServerProtocol, *args: Any, **kwargs: Any) -> None:
            super().__init__(protocol, *args, **kwargs)
            self._head = b""  # the first bytes, until they say whether this is ours
            self._decided = False
            self._intake: PostIntake | None = None
            self._posted: asyncio.Future[Posted | Response] = self.loop.create_future()

        def data_received(self, data: bytes) -> None:
            if self._decided:
                if self._intake is None:
                    super().data_received(data)
                elif not self._posted.done():
                    self._take(data)
                return
            self._head += data
            head = self._head
            if not head.startswith(REQUEST_PREFIXES) and any(
                prefix.startswith(head) for prefix in REQUEST_PREFIXES
            ):
                return  # (a method's first bytes)
            self._head, self._decided = b"", True
            if head.startswith(REQUEST_PREFIXES):
                self._intake = PostIntake(MAX_BODY)
                self._take(head)
            else:
                super().data_received(head)

        def eof_received(self) -> bool | None:  # type: ignore[override]
            if self._intake is None:
                super().eof_received()
                return None
            return True  # a POST half-closed after its body: the reply still goes out

        def _take(self, data: bytes) -> None:
            assert self._intake is not None
            outcome = self._intake.feed(data)
            if outcome is not None:
                self.transport.pause_reading()  # one request: nothing more is read
                self._posted.set_result(outcome)

        async def handshake(self, *args: Any, **kwargs: Any) -> None:
            waiting: list[asyncio.Future[Any]] = [
                self.request_rcvd,
                self.connection_lost_waiter,
                self._posted,
            ]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if not self._posted.done():
                await super().handshake(*args, **kwargs)  # a GET: websockets' own
                return
            outcome = self._posted.result()
            reply = outcome if isinstance(outcome, Response) else await handler(self, outcome)
            self.transport.write(reply_bytes(secure(reply)))
            # (websockets aborts the transport once this returns: the reply is
            # let out first, within the handshake's timeout)
            while self.transport.get_write_buffer_size() and not self.transport.is_closing():
                await anyio.sleep(0.01)
            self.transport.close()

    return PostingConnection

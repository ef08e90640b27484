"""ElevenLabs over the stream-input WebSocket: a turn's text in, its audio out, continuously.

One socket per turn (``/stream-input``), or with ``tts.multi_context`` one
``/multi-stream-input`` socket for the session and a context per turn (closed
with ``close_context`` at its end or on interruption; the socket in ``aclose``).
The query asks for ``sync_alignment=true`` so each audio chunk carries the
timings of its own characters and can be attributed as it arrives.

This module holds the engine and a turn's stream (opening, re-opening and
closing its socket, the HTTP fallback); what is sent, and when it is flushed,
is in ``elevenlabs_ws_send``, what is received in ``elevenlabs_ws_receive``, and
the attribution of the service's alignment to the pieces in
``elevenlabs_alignment``.

Faults. A dropped socket (before or after some audio) is re-opened once and
only the text not yet voiced is sent again (``stats.reconnects``); a second
drop, an error frame from the service, a malformed frame, or nothing received
for ``read_timeout_s`` while text is outstanding is one ``TtsError``. A
handshake refused with 429/5xx is retried with the pipeline's policy; if the
socket cannot be opened at all, the turn is spoken over HTTP
(``ElevenLabsHttpEngine``) instead, with a warning logged once per engine.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from types import TracebackType
from typing import Self

import anyio
from anyio.abc import TaskGroup
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.protocol import State

from ..infra.redact import redact
from ..vendors.tls import shared_ssl_context
from .base import StreamStats, TtsError, TtsStream, Voiced
from .elevenlabs_alignment import PieceAttribution
from .elevenlabs_common import CONNECT_TIMEOUT_S, ElevenLabsConfig
from .elevenlabs_http import ElevenLabsHttpEngine
from .elevenlabs_ws_receive import SocketReceiver, StreamItem
from .elevenlabs_ws_send import CLOSE_TIMEOUT_S, SocketSender, close_socket
from .options import TtsOptions
from .piece_stream import PieceStream
from .retrying import retry_call

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 16 * 1024 * 1024  # a second of pcm_44100 is 120 KB as base64
# Socket close codes that say the request itself was refused: re-opening the
# socket would only be refused again.
REFUSED_CODES = {1003, 1007, 1008, 1009, 1010}


class ElevenLabsSocketEngine:
    """``elevenlabs:VOICE_ID``: see the module docstring."""

    local = False

    def __init__(
        self, voice_id: str, options: TtsOptions | None = None, sink_rate: int | None = None
    ) -> None:
        options = options or TtsOptions(spec=f"elevenlabs:{voice_id}")
        self.config = ElevenLabsConfig.resolve(voice_id, options, sink_rate)
        self.name = f"elevenlabs:{voice_id}"
        self.sample_rate = self.config.sample_rate
        self.multi_context = options.multi_context
        # A space is sent after this long without text (the service closes the
        # socket after inactivity_timeout_s).
        self.keepalive_s = min(options.inactivity_timeout_s / 2, 10.0)
        self.http = ElevenLabsHttpEngine(voice_id, config=self.config)  # the fallback
        self.fallbacks = 0  # turns spoken over HTTP because the socket would not open
        self._session: ClientConnection | None = None  # multi-context: the session's socket
        self._contexts = itertools.count(1)

    def __repr__(self) -> str:
        return f"ElevenLabsSocketEngine({self.config!r}, multi_context={self.multi_context})"

    async def start(self) -> None:
        await self.http.start()  # checks the key and the voice once

    def open_stream(self) -> TtsStream:
        return SocketStream(self)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(CLOSE_TIMEOUT_S):
                    await session.send(json.dumps({"close_socket": True}))
                await close_socket(session)
        await self.http.aclose()

    async def connect(self, *, multi: bool) -> ClientConnection:
        """A socket, the handshake retried for 429/5xx and refused connections."""
        config = self.config

        async def attempt() -> ClientConnection:
            try:
                url = config.socket_url(multi=multi)
                return await connect(
                    url,
                    ssl=shared_ssl_context() if url.startswith("wss:") else None,
                    additional_headers={"xi-api-key": config.key},
                    open_timeout=CONNECT_TIMEOUT_S,
                    close_timeout=CLOSE_TIMEOUT_S,
                    ping_interval=None,  # the read timeout and the keepalive do this job
                    max_size=MAX_FRAME_BYTES,
                    compression=None,  # base64 audio does not compress; saves CPU
                )
            except InvalidStatus as exc:
                response = exc.response
                try:
                    body = json.loads(response.body or b"")
                except ValueError:
                    body = None
                raise config.status_error(
                    response.status_code, dict(response.headers.raw_items()), body, "socket"
                ) from None
            except (OSError, TimeoutError, InvalidHandshake) as exc:
                raise config.connection_error(exc, "socket") from None

        return await retry_call(attempt, config.policy)

    def session_socket(self) -> ClientConnection | None:
        """The multi-context socket an earlier turn opened, if it is still open."""
        if self._session is not None and self._session.state is not State.OPEN:
            self._session = None
        return self._session

    def note_fallback(self, error: TtsError) -> None:
        self.fallbacks += 1
        if self.fallbacks == 1:
            log.warning(
                "ElevenLabs socket unavailable (%s): speaking over HTTP", redact(str(error))
            )


class SocketStream:
    """One turn over the socket (see the module docstring)."""

    def __init__(self, engine: ElevenLabsSocketEngine) -> None:
        self.engine = engine
        self.config = engine.config
        self.multi = engine.multi_context
        self.stats = StreamStats()
        self._attribution = PieceAttribution(self.config.sample_rate)
        self._sender = SocketSender(
            self.config,
            self._attribution,
            self.stats,
            context_id=f"turn-{next(engine._contexts)}" if self.multi else None,
            keepalive_s=engine.keepalive_s,
        )
        self._receiver = SocketReceiver(self.config, self._attribution, self._sender, self.stats)
        self._reconnected = False
        self._out_send, self._out_recv = anyio.create_memory_object_stream[StreamItem](math.inf)
        self._tg: TaskGroup | None = None
        self._fallback: PieceStream | None = None

    # ------------------------------------------------------------ the stream

    async def __aenter__(self) -> Self:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        try:
            try:
                await self._open()
            except TtsError as error:
                if not error.retryable:
                    raise
                self.engine.note_fallback(error)
                fallback = PieceStream(self.engine.http)
                fallback.stats = self.stats
                await fallback.__aenter__()
                self._fallback = fallback
                return self
            tg.start_soon(self._receiver.run, self._out_send, self._dropped)
            tg.start_soon(self._sender.keepalive)
        except BaseException as exc:
            tg.cancel_scope.cancel()
            await self._close_connection(interrupted=True)
            await tg.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        tg = self._tg
        assert tg is not None
        try:
            if self._fallback is not None:
                await self._fallback.__aexit__(exc_type, exc, tb)
            tg.cancel_scope.cancel()  # the receiver and the keepalive
            self._out_send.close()
            self._out_recv.close()
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                await tg.__aexit__(exc_type, exc, tb)
            else:  # the block's own error goes on as it is, not in a group
                await tg.__aexit__(None, None, None)
        finally:
            if self._fallback is None:
                await self._close_connection(interrupted=not self._receiver.finished)

    async def push(self, text: str) -> None:
        if self._fallback is not None:
            return await self._fallback.push(text)
        async with self._sender.lock:  # added under the lock: a reconnect resends it exactly once
            piece = self._attribution.add_piece(text)
            await self._sender.send_piece(piece, self._attribution.texts[piece])
            self._receiver.text_sent(piece=True)

    async def end_input(self) -> None:
        if self._fallback is not None:
            return await self._fallback.end_input()
        async with self._sender.lock:
            self._sender.ended = True
            await self._sender.send_end()
            self._receiver.text_sent()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Voiced:
        if self._fallback is not None:
            return await self._fallback.__anext__()
        try:
            item = await self._out_recv.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None
        if isinstance(item, TtsError):
            raise item
        return item

    # ------------------------------------------------------------ the socket

    async def _open(self) -> None:
        ws = self.engine.session_socket() if self.multi else None
        if ws is not None:
            self.stats.reused_connection = True
        else:
            ws = await self.engine.connect(multi=self.multi)
            if self.multi:
                self.engine._session = ws
        self._sender.ws = ws
        await self._sender.send_init()

    async def _dropped(self, exc: BaseException) -> None:
        """Re-open once and resend only the text not yet voiced."""
        code = getattr(getattr(exc, "rcvd", None), "code", None)
        reason = getattr(getattr(exc, "rcvd", None), "reason", "") or ""
        if code in REFUSED_CODES:
            raise TtsError(
                redact(f"ElevenLabs closed the socket ({code}): {reason}")[:300], kind="stream"
            )
        if self._reconnected:
            raise TtsError("ElevenLabs dropped the socket twice in one turn", retryable=True)
        self._reconnected = True
        self.stats.reconnects += 1
        async with self._sender.lock:
            old = self._sender.ws
            if old is not None:
                await close_socket(old)
            ws = await self.engine.connect(multi=self.multi)
            if self.multi:
                self.engine._session = ws
            self._sender.ws = ws
            self._attribution.new_connection()
            self._receiver.new_connection()
            await self._sender.resend()
            self._receiver.text_sent()

    async def _close_connection(self, *, interrupted: bool) -> None:
        ws, self._sender.ws = self._sender.ws, None
        if interrupted and ws is not None:
            self.stats.cancelled_requests += 1
        if ws is None:
            return
        if not self.multi:
            await close_socket(ws)
        elif interrupted and ws.state is State.OPEN:
            closed = False
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT_S):
                try:
                    await ws.send(
                        json.dumps({"context_id": self._sender.context_id, "close_context": True})
                    )
                    closed = True
                except ConnectionClosed:
                    pass
            if not closed:  # the socket is stuck: give it up
                if self.engine._session is ws:
                    self.engine._session = None
                await close_socket(ws)

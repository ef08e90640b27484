"""ElevenLabs over the stream-input WebSocket: a turn's text in, its audio out, continuously.

One socket per turn (``/stream-input``), or with ``tts.multi_context`` one
``/multi-stream-input`` socket for the session and a context per turn (closed
with ``close_context`` at its end or on interruption; the socket in ``aclose``).
The query asks for ``sync_alignment=true`` so each audio chunk carries the
timings of its own characters and can be attributed as it arrives.

Flushing. The service buffers text until its chunk schedule is met. A piece is
sent with ``flush: true`` when everything sent before it has been voiced — the
first piece, and any piece after the service went idle — since then waiting
for more text only delays audio. Measured against FakeElevenLabs (100 ms TTFB,
the default 120-character schedule, three pieces 0.3 s apart): first audio
102 ms after the first push with this rule, 1010 ms without flushes (the short
first sentences wait in the buffer until the end of input). A piece that
arrives while the service is still speaking is sent without a flush, so the
service can voice it together with what follows (better prosody), and once
the service has voiced everything flushed so far a bare flush makes it start on
the rest: text never sits in the buffer while the listener waits.
``chunk_length_schedule`` therefore matters only for text that comes faster
than it is spoken (it is sent only when configured).

Attribution. Alignment characters are counted against the text sent on the
connection (each piece is sent as ``piece + " "``; the initial space, keepalive
spaces and bare flushes are filler); a chunk that straddles two pieces is split
at the first character of the second, so each ``Voiced`` belongs to one piece,
and its ``Alignment`` holds that piece's characters (filler left out).

Faults. A dropped socket (before or after some audio) is re-opened once and
only the text not yet voiced is sent again (``stats.reconnects``); a second
drop, an error frame from the service, a malformed frame, or nothing received
for ``read_timeout_s`` while text is outstanding is one ``TtsError``. A
handshake refused with 429/5xx is retried with the pipeline's policy; if the
socket cannot be opened at all, the turn is spoken over HTTP
(``ElevenLabsHttpEngine``) instead, with a warning logged once per engine.
Keepalive: with no text sent for ``keepalive_s`` (well under
``inactivity_timeout``), a space is sent, so a turn whose LLM waits on a tool
keeps its socket.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import contextlib
import itertools
import json
import logging
import math
import time
from types import TracebackType
from typing import Any, Self

import anyio
from anyio.abc import TaskGroup
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.protocol import State

from ..infra.redact import redact
from ..vendors.tls import shared_ssl_context
from ..vocab.audio import AudioChunk, Samples
from .base import Alignment, StreamStats, TtsError, TtsStream, Voiced
from .elevenlabs_common import CONNECT_TIMEOUT_S, AudioDecoder, ElevenLabsConfig
from .elevenlabs_http import ElevenLabsHttpEngine
from .options import TtsOptions
from .piece_stream import PieceStream
from .retrying import retry_call

log = logging.getLogger(__name__)

# An interrupted turn waits at most this long for the close handshake.
CLOSE_TIMEOUT_S = 0.5
MAX_FRAME_BYTES = 16 * 1024 * 1024  # a second of pcm_44100 is 120 KB as base64
# Socket close codes that say the request itself was refused: re-opening the
# socket would only be refused again.
REFUSED_CODES = {1003, 1007, 1008, 1009, 1010}

_Item = Voiced | TtsError


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


async def close_socket(ws: ClientConnection) -> None:
    """Close at once: a short close handshake, then the TCP connection is cut."""
    with anyio.CancelScope(shield=True):
        with anyio.move_on_after(CLOSE_TIMEOUT_S):
            await ws.close()
        if ws.state is not State.CLOSED:
            ws.transport.abort()


class _Layout:
    """The characters sent on one connection, and which piece each belongs to
    (None: filler — the initial space, keepalives, bare flushes)."""

    def __init__(self) -> None:
        self.length = 0
        self.owned_end = 0  # end of the last piece text sent
        self._starts: list[int] = []
        self._spans: list[tuple[int, int, int]] = []  # (start, end, piece)

    def add(self, text: str, piece: int | None) -> None:
        start, self.length = self.length, self.length + len(text)
        if piece is not None and text:
            self._starts.append(start)
            self._spans.append((start, self.length, piece))
            self.owned_end = self.length

    def owner(self, position: int) -> int | None:
        i = bisect.bisect_right(self._starts, position) - 1
        if i >= 0:
            _, end, piece = self._spans[i]
            if position < end:
                return piece
        return None


class SocketStream:
    """One turn over the socket (see the module docstring)."""

    def __init__(self, engine: ElevenLabsSocketEngine) -> None:
        self.engine = engine
        self.config = engine.config
        self.multi = engine.multi_context
        self.stats = StreamStats()
        self._texts: list[str] = []  # each piece as sent: text + " "
        self._voiced: list[int] = []  # characters of each piece voiced so far
        self._ws: ClientConnection | None = None
        self._context_id = f"turn-{next(engine._contexts)}" if self.multi else None
        self._layout = _Layout()
        self._aligned = 0  # alignment characters received on this connection
        self._flushed_to = 0  # layout position up to which generation was forced
        self._current = 0  # the piece audio without alignment belongs to
        self._decoder = AudioDecoder(self.config.output_format)
        self._ended = False  # end_input() was called
        self._finished = False  # the service said isFinal for this turn
        self._reconnected = False
        self._lock = anyio.Lock()  # one sender at a time; a reconnect holds it
        self._last_sent = time.monotonic()  # any text (keepalive included)
        self._progress = time.monotonic()  # last frame received, or piece / end sent
        # Since when the service has had text it has not voiced (None: it is idle):
        # its time producing audio, for the real-time factor.
        self._busy_from: int | None = None
        self._out_send, self._out_recv = anyio.create_memory_object_stream[_Item](math.inf)
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
            tg.start_soon(self._receive)
            tg.start_soon(self._keepalive)
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
                await self._close_connection(interrupted=not self._finished)

    async def push(self, text: str) -> None:
        if self._fallback is not None:
            return await self._fallback.push(text)
        async with self._lock:  # appended under the lock: a reconnect resends it exactly once
            piece = len(self._texts)
            self._texts.append(text + " ")
            self._voiced.append(0)
            await self._send_piece(piece, self._texts[piece])
            self._progress = time.monotonic()
            if self._busy_from is None:
                self._busy_from = time.perf_counter_ns()

    async def end_input(self) -> None:
        if self._fallback is not None:
            return await self._fallback.end_input()
        async with self._lock:
            self._ended = True
            await self._send_end()
            self._progress = time.monotonic()

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

    # ------------------------------------------------------------ sending

    async def _open(self) -> None:
        ws = self.engine.session_socket() if self.multi else None
        if ws is not None:
            self.stats.reused_connection = True
        else:
            ws = await self.engine.connect(multi=self.multi)
            if self.multi:
                self.engine._session = ws
        self._ws = ws
        await self._send_init()

    async def _send_init(self) -> None:
        first: dict[str, Any] = {"text": " "}
        settings = self.config.voice_settings()
        if settings is not None:
            first["voice_settings"] = settings
        schedule = self.config.options.chunk_length_schedule
        if schedule is not None:
            first["generation_config"] = {"chunk_length_schedule": list(schedule)}
        await self._send(first, None)

    async def _send_piece(self, piece: int, text: str) -> None:
        # The service is idle (everything sent has been voiced): flush, or the
        # text waits in its buffer for more.
        flush = self._aligned >= self._layout.owned_end
        await self._send({"text": text, "flush": flush}, piece)

    async def _send_end(self) -> None:
        if self.multi:
            await self._send({"text": " ", "flush": True}, None)
            await self._send({"close_context": True}, None)
        else:
            await self._send({"text": ""}, None)

    async def _send(self, message: dict[str, Any], piece: int | None) -> None:
        """Send on the current connection; a closed one is left to the receiver
        (it re-opens and resends what was not voiced)."""
        ws = self._ws
        if ws is None:
            return
        if self._context_id is not None:
            message = {**message, "context_id": self._context_id}
        try:
            await ws.send(json.dumps(message))
        except ConnectionClosed:
            return
        text = message.get("text") or ""
        self._layout.add(text, piece)
        if piece is not None:
            self.stats.chars_billed += len(text)
        if message.get("flush"):
            self._flushed_to = self._layout.length
        self._last_sent = time.monotonic()

    async def _keepalive(self) -> None:
        while not self._ended:
            idle = time.monotonic() - self._last_sent
            if idle < self.engine.keepalive_s:
                await anyio.sleep(self.engine.keepalive_s - idle)
                continue
            async with self._lock:
                if not self._ended:
                    # Multi-context: an empty text keeps a context alive.
                    await self._send({"text": "" if self.multi else " "}, None)

    # ------------------------------------------------------------ receiving

    async def _receive(self) -> None:
        try:
            out = self._out_send
            while not self._finished:
                ws = self._ws
                assert ws is not None
                try:
                    raw = await self._recv(ws)
                except ConnectionClosed as exc:
                    await self._dropped(exc)
                    continue
                except OSError as exc:
                    await self._dropped(exc)
                    continue
                for item in self._frame(raw):
                    await out.send(item)
                if not self._finished:
                    await self._flush_if_idle()
        except TtsError as error:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._out_send.send_nowait(error)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the reader left: the turn ended early
        finally:
            self._out_send.close()

    async def _recv(self, ws: ClientConnection) -> str | bytes:
        timeout = self.config.options.read_timeout_s
        poll = min(max(timeout / 4, 0.05), 1.0)
        while True:
            with anyio.move_on_after(poll):
                return await ws.recv()
            outstanding = self._ended or self._aligned < self._layout.owned_end
            if outstanding and time.monotonic() - self._progress >= timeout:
                raise TtsError(
                    f"ElevenLabs sent nothing for {timeout:g} s with text outstanding "
                    "(tts.read_timeout_s)",
                    retryable=True,
                )

    async def _flush_if_idle(self) -> None:
        """Everything flushed has been voiced but text sent since waits in the
        service's buffer: make it start on that text now."""
        if self._ended:
            return  # the end of input generates the rest
        if self._aligned >= self._flushed_to and self._layout.owned_end > self._flushed_to:
            async with self._lock:
                await self._send({"text": " ", "flush": True}, None)

    async def _dropped(self, exc: BaseException) -> None:
        """Re-open once and resend only the text not yet voiced."""
        code = getattr(getattr(exc, "rcvd", None), "code", None)
        reason = getattr(getattr(exc, "rcvd", None), "reason", "") or ""
        if code in REFUSED_CODES:
            raise TtsError(redact(f"ElevenLabs closed the socket ({code}): {reason}")[:300])
        if self._reconnected:
            raise TtsError("ElevenLabs dropped the socket twice in one turn", retryable=True)
        self._reconnected = True
        self.stats.reconnects += 1
        async with self._lock:
            old = self._ws
            if old is not None:
                await close_socket(old)
            ws = await self.engine.connect(multi=self.multi)
            if self.multi:
                self.engine._session = ws
            self._ws = ws
            self._layout = _Layout()
            self._aligned = self._flushed_to = 0
            self._decoder = AudioDecoder(self.config.output_format)
            await self._send_init()
            for piece, text in enumerate(self._texts):
                rest = text[min(self._voiced[piece], len(text)) :]
                if rest:
                    await self._send_piece(piece, rest)
            if self._ended:
                await self._send_end()
            self._progress = time.monotonic()

    def _frame(self, raw: str | bytes) -> list[_Item]:
        """The Voiced items of one server message (in order); a TtsError for an
        error message or a malformed frame."""
        try:
            data = json.loads(raw)
        except ValueError:
            raise TtsError("ElevenLabs sent a malformed frame (not JSON)") from None
        if not isinstance(data, dict):
            raise TtsError("ElevenLabs sent a malformed frame (not a JSON object)")
        self._progress = time.monotonic()
        if self.multi:
            context = data.get("contextId", data.get("context_id"))
            if context is not None and context != self._context_id:
                return []  # an earlier turn's closed context, still finishing
        if data.get("error") or (data.get("message") and not data.get("audio")):
            raise self._service_error(data)
        items: list[_Item] = []
        audio = data.get("audio")
        if audio:
            if not isinstance(audio, str):
                raise TtsError("ElevenLabs sent a malformed frame (audio is not text)")
            try:
                data_bytes = base64.b64decode(audio, validate=True)
            except (binascii.Error, ValueError):
                raise TtsError("ElevenLabs sent a malformed frame (audio is not base64)") from None
            alignment = data.get("alignment") or data.get("normalizedAlignment")
            items = self._attribute(self._decoder.feed(data_bytes), alignment)
            self._note_busy()
        if data.get("isFinal"):
            self._finished = True
        return items

    def _note_busy(self) -> None:
        if self._busy_from is None:
            return
        now = time.perf_counter_ns()
        self.stats.busy_ns += now - self._busy_from
        self._busy_from = now if self._aligned < self._layout.owned_end else None

    def _service_error(self, data: dict[str, Any]) -> TtsError:
        code = str(data.get("error") or "")
        message = str(data.get("message") or "")
        if code in ("invalid_api_key", "missing_api_key", "unauthorized"):
            return self.config.auth_error(f"socket error {code}")
        if code == "voice_not_found":
            return self.config.voice_error()
        if code == "input_timeout_exceeded":
            return TtsError(
                "ElevenLabs closed the socket: no text within its inactivity timeout "
                f"({self.config.options.inactivity_timeout_s} s, input_timeout_exceeded)"
            )
        return TtsError(redact(f"ElevenLabs socket error {code or '?'}: {message}")[:300])

    def _attribute(self, samples: Samples, alignment: Any) -> list[_Item]:
        """Split one chunk's audio by piece, at the first character of each next piece."""
        now = time.perf_counter_ns()
        rate = self.config.sample_rate
        if not isinstance(alignment, dict):
            if not len(samples):
                return []
            return [Voiced(self._current, AudioChunk(samples, rate), None, now)]
        chars = alignment.get("chars") or []
        starts = alignment.get("charStartTimesMs") or []
        durations = alignment.get("charDurationsMs") or alignment.get("charsDurationsMs") or []
        if not (len(chars) == len(starts) == len(durations)):
            raise TtsError("ElevenLabs sent a malformed frame (alignment lists differ in length)")
        # (piece, start ms in the chunk, [(char, start, duration)]) per piece
        groups: list[tuple[int, float, list[tuple[str, float, float]]]] = [(self._current, 0.0, [])]
        for i, char in enumerate(chars):
            piece = self._layout.owner(self._aligned + i)
            if piece is None:
                continue
            if piece != groups[-1][0]:
                groups.append((piece, float(starts[i]), []))
            self._voiced[piece] += 1
            groups[-1][2].append((str(char), float(starts[i]), float(durations[i])))
        self._aligned += len(chars)
        self._current = groups[-1][0]
        items: list[_Item] = []
        for n, (piece, start_ms, entries) in enumerate(groups):
            begin = _sample_at(start_ms, rate, len(samples)) if n else 0
            end = _sample_at(groups[n + 1][1], rate, len(samples)) if n + 1 < len(groups) else None
            part = samples[begin:end]
            if not len(part) and not entries:
                continue
            aligned = Alignment(
                tuple(c for c, _, _ in entries),
                tuple(max(0.0, s - start_ms) for _, s, _ in entries),
                tuple(d for _, _, d in entries),
            )
            items.append(Voiced(piece, AudioChunk(part, rate), aligned, now))
        return items

    async def _close_connection(self, *, interrupted: bool) -> None:
        ws, self._ws = self._ws, None
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
                        json.dumps({"context_id": self._context_id, "close_context": True})
                    )
                    closed = True
                except ConnectionClosed:
                    pass
            if not closed:  # the socket is stuck: give it up
                if self.engine._session is ws:
                    self.engine._session = None
                await close_socket(ws)


def _sample_at(ms: float, rate: int, total: int) -> int:
    return min(total, max(0, round(ms * rate / 1000)))

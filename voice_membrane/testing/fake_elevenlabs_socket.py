"""One accepted stream-input WebSocket of the fake ElevenLabs (single or
multi-stream): the received text buffered per context and generated on the
chunk schedule, the audio sent paced and faulted as scripted, and the socket's
errors and close (the protocol: ``fake_elevenlabs``'s docstring)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.types import Message
from starlette.websockets import WebSocket

from .fake_elevenlabs_wire import (
    DEFAULT_FORMAT,
    ERROR_STATUS,
    FORMATS,
    INACTIVITY,
    aligned_frames,
    audio_message,
    final_message,
    socket_error,
    unsupported,
)
from .fake_speech import RecordedConnection, SpeechScript, encode, sample_width, sleep_until, speak
from .loopback import tcp_transport

DEFAULT_SCHEDULE = (120, 160, 250, 290)
TRY_TRIGGER_MIN = 50


class _SocketClosed(Exception):
    """The socket is finished (closed by the fake, the client, or a scripted drop)."""


@dataclass(slots=True)
class _Context:
    """One stream of text and audio: the whole socket, or one multi-stream context."""

    id: str
    send: MemoryObjectSendStream[tuple[str, float]]
    receive: MemoryObjectReceiveStream[tuple[str, float]]
    buffer: str = ""
    generations: int = 0
    schedule: tuple[int, ...] = DEFAULT_SCHEDULE
    open: bool = True
    first: dict[str, Any] = field(default_factory=dict)
    done: anyio.Event = field(default_factory=anyio.Event)  # its isFinal is out


class SocketHost(Protocol):
    """What a socket session asks of its fake server (``FakeElevenLabs`` is one)."""

    def refusal(
        self, key: Any, voice_id: str | None, *, missing_key: str
    ) -> tuple[int, str] | None: ...

    def note_text(self, text: str) -> None: ...


class StreamInputSession:
    """One accepted socket: a receive loop and one generation worker per context."""

    def __init__(
        self,
        server: SocketHost,
        websocket: WebSocket,
        conn: RecordedConnection,
        script: SpeechScript,
        *,
        multi: bool,
    ) -> None:
        self.server, self.ws, self.conn, self.script, self.multi = (
            server,
            websocket,
            conn,
            script,
            multi,
        )
        query = conn.query
        self.voice_id = websocket.path_params["voice_id"]
        self.output_format = query.get("output_format", DEFAULT_FORMAT)
        self.auto_mode = query.get("auto_mode", "false").lower() == "true"
        self.timeout = float(query.get("inactivity_timeout", "20"))
        self.contexts: dict[str, _Context] = {}
        self.send_lock = anyio.Lock()
        self.finished = False  # the fake closed (or dropped) the socket
        self.input_ended = False
        self.authorised = False
        self.tg: TaskGroup | None = None

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        try:
            async with anyio.create_task_group() as tg:
                self.tg = tg
                if "xi-api-key" in self.conn.headers:
                    await self._authorise(self.conn.headers["xi-api-key"])
                await self._receive_loop()
        except* _SocketClosed:
            pass

    async def _receive_loop(self) -> None:
        while True:
            message: Message | None = None
            with anyio.move_on_after(self.timeout if not self.input_ended else math.inf):
                message = await self.ws.receive()
            if message is None:
                await self._fail("input_timeout_exceeded", INACTIVITY.format(self.timeout))
            assert message is not None
            if message["type"] == "websocket.disconnect":
                if not self.finished:
                    self.conn.client_closed = True
                raise _SocketClosed
            raw = message.get("text") or (message.get("bytes") or b"").decode(errors="replace")
            try:
                data = json.loads(raw)
            except json.JSONDecodeError:
                data = raw
            self.conn.messages.append(data)
            if not isinstance(data, dict):
                await self._fail("invalid_message", "Messages must be JSON objects.")
            assert isinstance(data, dict)
            if not self.authorised:
                await self._authorise(data.get("xi_api_key") or data.get("xi-api-key"))
            await self._handle(data)

    async def _authorise(self, key: Any) -> None:
        missing = "Missing API key (xi-api-key header or field)."
        refused = self.server.refusal(key, self.voice_id, missing_key=missing)
        if refused is not None:
            status, message = refused
            await self._fail(ERROR_STATUS[status], message)
        if self.output_format not in FORMATS:
            await self._fail("invalid_output_format", unsupported(self.output_format))
        self.authorised = True

    async def _handle(self, data: dict[str, Any]) -> None:
        if self.multi:
            context_id = str(data.get("context_id") or "default")
            if data.get("close_socket"):
                for context in list(self.contexts.values()):
                    self._close_context(context)
                self.input_ended = True
                await self._close_when_done()
                return
            if data.get("close_context"):
                closing = self.contexts.get(context_id)
                if closing is not None:
                    self._close_context(closing)
                return
        elif self.input_ended:
            return  # after {"text": ""} the socket only finishes what it has
        else:
            context_id = ""
        existing = self.contexts.get(context_id)
        if existing is None or not existing.open:
            context = self._open_context(context_id, data)
        else:
            context = existing
            if not self.multi:
                await self._check_settings(context, data)
        text = data.get("text")
        if isinstance(text, str) and text:
            self.conn.texts[context_id] = self.conn.texts.get(context_id, "") + text
            self.server.note_text(text)
            context.buffer += text
        if text == "" and not self.multi:  # end of input
            self._generate(context)
            self._close_context(context)
            self.input_ended = True
            await self._close_when_done()
            return
        threshold = context.schedule[min(context.generations, len(context.schedule) - 1)]
        if (
            data.get("flush")
            or (self.auto_mode and text)
            or (data.get("try_trigger_generation") and len(context.buffer) >= TRY_TRIGGER_MIN)
            or len(context.buffer) >= threshold
        ):
            self._generate(context)

    def _open_context(self, context_id: str, data: dict[str, Any]) -> _Context:
        send, receive = anyio.create_memory_object_stream[tuple[str, float]](math.inf)
        context = _Context(context_id, send, receive, first=data)
        schedule = (data.get("generation_config") or {}).get("chunk_length_schedule")
        if isinstance(schedule, list) and schedule:
            context.schedule = tuple(int(n) for n in schedule)
        self.contexts[context_id] = context
        assert self.tg is not None
        self.tg.start_soon(self._worker, context)
        return context

    async def _check_settings(self, context: _Context, data: dict[str, Any]) -> None:
        for name in ("voice_settings", "generation_config"):
            if name in data and data[name] != context.first.get(name):
                await self._fail(
                    "invalid_request",
                    f"{name} field must be provided in the first message and then either be "
                    "not provided or not change.",
                )

    def _generate(self, context: _Context) -> None:
        if context.buffer.strip():
            self.conn.generations.append((context.id, context.buffer))
            context.send.send_nowait((context.buffer, time.monotonic()))
            context.buffer = ""
            context.generations += 1

    def _close_context(self, context: _Context) -> None:
        context.buffer = ""
        context.open = False
        context.send.close()

    async def _close_when_done(self) -> None:
        """Close 1000 once every context's worker has sent its isFinal."""
        assert self.tg is not None
        self.tg.start_soon(self._close_after_workers)

    async def _close_after_workers(self) -> None:
        for context in list(self.contexts.values()):
            await context.done.wait()
        await self._close(1000)

    # ------------------------------------------------------------ sending

    async def _worker(self, context: _Context) -> None:
        encoding, rate = FORMATS[self.output_format]
        context_id = context.id if self.multi else None
        async with context.receive:
            async for text, triggered in context.receive:
                samples = await speak(text)
                await sleep_until(triggered + self.script.ttfb_s)
                await self._send_audio(context_id, text, encode(samples, rate, encoding), rate)
            await self._fault_due()
            await self._send(json.dumps(final_message(context_id)))
            context.done.set()

    async def _send_audio(self, context_id: str | None, text: str, audio: bytes, rate: int) -> None:
        width = sample_width(FORMATS[self.output_format][0])
        for frame in aligned_frames(text, len(audio) // width, rate, self.script.frame_ms):
            await self._fault_due()
            chunk = audio[frame.start * width : frame.end * width]
            await self._send(json.dumps(audio_message(chunk, frame.alignment, context_id)))
            self.conn.frames_sent += 1
            await anyio.sleep(self.script.char_s * frame.chars)

    async def _fault_due(self) -> None:
        fault = self.script.fault_at(self.conn.frames_sent)
        if fault is None:
            return
        if fault.kind == "drop":
            await self._drop()
        elif fault.kind == "stall":
            await anyio.sleep_forever()
        elif fault.malformed == "json":
            await self._send('{"audio": "AAAA", "isFinal": nu')
        else:
            await self._send(json.dumps({"audio": "not base64!", "isFinal": None}))

    async def _send(self, text: str) -> None:
        if self.finished:
            raise _SocketClosed
        async with self.send_lock:
            try:
                await self.ws.send_text(text)
            except Exception as exc:  # the client went away mid-send
                self.conn.client_closed = True
                raise _SocketClosed from exc

    async def _fail(self, error: str, message: str) -> None:
        """The real service's error frame, then close 1008 with the message as reason."""
        await self._send(json.dumps(socket_error(error, message)))
        await self._close(1008, message)

    async def _close(self, code: int, reason: str = "") -> None:
        if not self.finished:
            self.finished = True
            self.conn.close_code = code
            reason_bytes = reason.encode()[:123]  # a close frame's reason is at most 123 bytes
            await self.ws.close(code, reason_bytes.decode(errors="ignore"))
        raise _SocketClosed

    async def _drop(self) -> None:
        """Cut the TCP connection: no close frame, as when a network path dies."""
        self.finished = True
        self.conn.dropped = True
        transport = tcp_transport(self.ws._send)
        if transport is not None:
            transport.abort()
        else:  # another ASGI server: the nearest thing
            await self.ws.close(1011)
        raise _SocketClosed

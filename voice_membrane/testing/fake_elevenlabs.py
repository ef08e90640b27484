"""A fake ElevenLabs text-to-speech API on loopback, speaking real speech.

Endpoints (``base_url`` is ``http://127.0.0.1:PORT``; the sockets are the same
paths on ``ws://``):

- ``WS /v1/text-to-speech/{voice_id}/stream-input`` — query ``model_id``,
  ``output_format`` (default ``mp3_44100_128`` as the real API, which this fake
  cannot encode: ask for ``pcm_16000|pcm_22050|pcm_24000|pcm_44100|ulaw_8000``),
  ``auto_mode``, ``inactivity_timeout`` (default 20 s), ``sync_alignment``
  (recorded). The first message initialises (``{"text": " ", "voice_settings",
  "generation_config": {"chunk_length_schedule": [...]}}``); text messages append
  to a buffer; ``{"text": ""}`` ends the input. The buffer is generated when it
  reaches the schedule's next threshold (default [120, 160, 250, 290], the last
  repeating), on ``flush: true``, on ``try_trigger_generation`` once it holds 50
  characters (the real minimum is unpublished; 50 is the schedule's documented
  minimum), on every message under ``auto_mode=true`` (the docs: auto mode
  "disables the chunk schedule and all buffers", for clients that send whole
  sentences), and at the end of input. A whitespace-only buffer waits for the
  next text. Each generation waits the script's TTFB, then goes out as audio
  messages ``{"audio": b64, "isFinal": null, "normalizedAlignment": {"chars",
  "charStartTimesMs", "charDurationsMs"}, "alignment": {...}}``. As the SDK's
  ``Alignment`` type documents, the times are relative to each message's own
  audio chunk, not to the whole stream; each character is in the message whose
  audio its start falls in (a message with none has ``null`` alignments), and the
  joined ``chars`` of all messages equal the text received, the initial ``" "``
  included. After the end of input and the last audio: ``{"isFinal": true}``,
  then close 1000.
- ``WS /v1/text-to-speech/{voice_id}/multi-stream-input`` — every message carries
  ``context_id`` (a missing one is ``"default"``); each context buffers and
  generates on its own (first message per context initialises it); replies carry
  ``contextId``; ``{"text": ""}`` only keeps a context alive; ``flush: true``
  generates; ``close_context: true`` drops the context's unflushed text, lets its
  generations finish and sends its ``{"isFinal": true, "contextId"}``;
  ``close_socket: true`` does that for every context, then closes 1000. The
  inactivity timeout here is per socket (the real one is per context).
- ``POST /v1/text-to-speech/{voice_id}/stream`` (``output_format``,
  ``optimize_streaming_latency``; JSON ``text``, ``model_id``, ``voice_settings``,
  ``previous_text``, ``next_text``) → chunked raw audio (``audio/pcm``,
  ``audio/basic`` for μ-law).
- ``GET /v1/voices/{voice_id}`` and ``GET /v1/voices``: the JSON the ``elevenlabs``
  SDK parses into ``Voice``.

Errors. HTTP: ``{"detail": {"status": ..., "message": ...}}`` — 401
``invalid_api_key``, 404 ``voice_not_found``, 422 (FastAPI's validation shape) for
a missing ``text`` or a format this fake cannot encode, scripted 429/5xx with
``retry-after``. WebSocket: the handshake is accepted (the key may come in the
first message, ``xi_api_key`` / ``xi-api-key``), then a bad or missing key, an
unknown voice, an unsupported format, changed ``voice_settings`` and inactivity
each send ``{"message", "error", "code": 1008}`` and close 1008 with the message
as the reason — the shape the real service sends for ``input_timeout_exceeded``
(reported verbatim in livekit/agents#218 and elevenlabs-docs#426; pipecat#1006
reports 1008 for a wrong key or voice). Scripted HTTP errors refuse the WebSocket
handshake with that status instead.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import math
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import Message
from starlette.websockets import WebSocket

from .fake_server import DropConnection
from .fake_speech import (
    RecordedConnection,
    SpeechScript,
    SpeechServer,
    char_timings,
    encode,
    frame_bounds,
    speak,
)

Encoding = Literal["pcm", "ulaw"]
FORMATS: dict[str, tuple[Encoding, int]] = {
    "pcm_16000": ("pcm", 16000),
    "pcm_22050": ("pcm", 22050),
    "pcm_24000": ("pcm", 24000),
    "pcm_44100": ("pcm", 44100),
    "ulaw_8000": ("ulaw", 8000),
}
CONTENT_TYPES = {"pcm": "audio/pcm", "ulaw": "audio/basic"}
DEFAULT_FORMAT = "mp3_44100_128"
DEFAULT_SCHEDULE = (120, 160, 250, 290)
TRY_TRIGGER_MIN = 50
INACTIVITY = (
    "Have not received a new text input within the timeout of {:g} seconds. Streaming input "
    "terminated. Please make sure to either feed the input in the timely manner, or to send "
    'the end of input text (empty string "") when done.'
)
ERROR_STATUS = {401: "invalid_api_key", 404: "voice_not_found", 429: "too_many_concurrent_requests"}


def error_body(status: int, message: str) -> dict[str, Any]:
    """ElevenLabs' error JSON for an HTTP status."""
    default = "internal_server_error" if status >= 500 else "invalid_request"
    return {"detail": {"status": ERROR_STATUS.get(status, default), "message": message}}


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message), status_code=status, headers=headers)


def _validation_error(loc: list[str], message: str) -> JSONResponse:
    """FastAPI's 422 shape (the SDK's ``UnprocessableEntityError`` parses it)."""
    detail = [{"loc": loc, "msg": message, "type": "value_error"}]
    return JSONResponse({"detail": detail}, status_code=422)


class _SocketClosed(Exception):
    """The socket is finished (closed by the fake, the client, or a scripted drop)."""


class FakeElevenLabs(SpeechServer):
    vendor = "elevenlabs"

    def __init__(
        self,
        *scripts: SpeechScript,
        api_key: str = "test-key",
        voices: dict[str, str] | None = None,
    ) -> None:
        super().__init__(*scripts)
        self.api_key = api_key
        self.voices = dict(voices) if voices is not None else {"fake-voice": "Fake Voice"}
        self._ids = itertools.count(1)

    def routes(self) -> Sequence[BaseRoute]:
        return [
            WebSocketRoute("/v1/text-to-speech/{voice_id}/stream-input", self._single),
            WebSocketRoute("/v1/text-to-speech/{voice_id}/multi-stream-input", self._multi),
            Route("/v1/text-to-speech/{voice_id}/stream", self._http_stream, methods=["POST"]),
            Route("/v1/voices/{voice_id}", self._voice, methods=["GET"]),
            Route("/v1/voices", self._voice_list, methods=["GET"]),
        ]

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {"ELEVENLABS_BASE_URL": self.base_url, "ELEVENLABS_API_KEY": self.api_key}

    # ------------------------------------------------------------ HTTP

    def _voice_json(self, voice_id: str) -> dict[str, Any]:
        return {
            "voice_id": voice_id,
            "name": self.voices[voice_id],
            "category": "premade",
            "labels": {"accent": "american"},
            "description": "espeak-ng en-us, served by voice_membrane's fake",
            "preview_url": None,
            "settings": None,
        }

    def _refuse(self, request: Request, voice_id: str | None) -> Response | None:
        key = request.headers.get("xi-api-key")
        if key is None:
            return _error(401, "Missing the xi-api-key header.")
        if key != self.api_key:
            return _error(401, "Invalid API key")
        if voice_id is not None and voice_id not in self.voices:
            return _error(404, f"A voice with voice_id {voice_id!r} was not found.")
        return None

    async def _voice(self, request: Request) -> Response:
        await self.record(request)
        voice_id = request.path_params["voice_id"]
        return self._refuse(request, voice_id) or JSONResponse(self._voice_json(voice_id))

    async def _voice_list(self, request: Request) -> Response:
        await self.record(request)
        voices = [self._voice_json(v) for v in self.voices]
        return self._refuse(request, None) or JSONResponse({"voices": voices})

    async def _http_stream(self, request: Request) -> Response:
        body = await self.record(request)
        voice_id = request.path_params["voice_id"]
        refused = self._refuse(request, voice_id)
        if refused is not None:
            return refused
        script = self.next_script()
        fault = script.fault
        if fault is not None and fault.kind == "http_error":
            headers = {} if fault.retry_after is None else {"retry-after": f"{fault.retry_after:g}"}
            return _error(fault.status, fault.message, headers)
        output_format = request.query_params.get("output_format", DEFAULT_FORMAT)
        if output_format not in FORMATS:
            return _validation_error(["query", "output_format"], _unsupported(output_format))
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            return _validation_error(["body", "text"], "Field required")
        self.note_text(text)
        encoding, rate = FORMATS[output_format]
        headers = {"request-id": f"fake-{next(self._ids)}"}
        chunks = _http_audio(script, text, encoding, rate)
        return self.stream(chunks, headers, media_type=CONTENT_TYPES[encoding])

    # ------------------------------------------------------------ WebSocket

    async def _single(self, websocket: WebSocket) -> None:
        await self._serve_socket(websocket, multi=False)

    async def _multi(self, websocket: WebSocket) -> None:
        await self._serve_socket(websocket, multi=True)

    async def _serve_socket(self, websocket: WebSocket, *, multi: bool) -> None:
        conn = RecordedConnection(
            websocket.url.path,
            dict(websocket.query_params),
            {k.lower(): v for k, v in websocket.headers.items()},
        )
        with self._lock:
            self.connections.append(conn)
        script = self.next_script()
        fault = script.fault
        if fault is not None and fault.kind == "http_error":
            headers = {} if fault.retry_after is None else {"retry-after": f"{fault.retry_after:g}"}
            await websocket.send_denial_response(_error(fault.status, fault.message, headers))
            return
        await websocket.accept()
        with self._lock:
            self.open_connections += 1
        try:
            await _Session(self, websocket, conn, script, multi=multi).run()
        finally:
            with self._lock:
                self.open_connections -= 1
                if conn.client_closed:
                    self.client_closed_early += 1


def _unsupported(output_format: str) -> str:
    return (
        f"output_format {output_format!r} is not supported by this fake server; "
        f"use one of {', '.join(FORMATS)}"
    )


async def _http_audio(
    script: SpeechScript, text: str, encoding: Encoding, rate: int
) -> AsyncIterator[bytes]:
    """The raw audio body, paced and faulted as scripted (``malformed`` does not
    apply to a raw audio body)."""
    began = time.monotonic()
    samples = await speak(text)
    audio = encode(samples, rate, encoding)
    width = 1 if encoding == "ulaw" else 2
    await _sleep_until(began + script.ttfb_s)
    bounds = frame_bounds(len(audio) // width, rate, script.frame_ms)
    for sent, (start, end) in enumerate(bounds):
        fault = script.fault_at(sent)
        if fault is not None and fault.kind == "drop":
            raise DropConnection
        if fault is not None and fault.kind == "stall":
            await anyio.sleep_forever()
        yield audio[start * width : end * width]
        await anyio.sleep(script.char_s * len(text) * (end - start) / max(1, len(audio) // width))
    fault = script.fault_at(len(bounds))
    if fault is not None and fault.kind == "drop":
        raise DropConnection
    if fault is not None and fault.kind == "stall":
        await anyio.sleep_forever()


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        await anyio.sleep(delay)


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


class _Session:
    """One accepted socket: a receive loop and one generation worker per context."""

    def __init__(
        self,
        server: FakeElevenLabs,
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
        if key is None:
            await self._fail("invalid_api_key", "Missing API key (xi-api-key header or field).")
        if key != self.server.api_key:
            await self._fail("invalid_api_key", "Invalid API key")
        if self.voice_id not in self.server.voices:
            await self._fail(
                "voice_not_found", f"A voice with voice_id {self.voice_id!r} was not found."
            )
        if self.output_format not in FORMATS:
            await self._fail("invalid_output_format", _unsupported(self.output_format))
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
        async with context.receive:
            async for text, triggered in context.receive:
                samples = await speak(text)
                await _sleep_until(triggered + self.script.ttfb_s)
                await self._send_audio(context, text, encode(samples, rate, encoding), rate)
            await self._fault_due()
            final: dict[str, Any] = {"isFinal": True}
            if self.multi:
                final["contextId"] = context.id
            await self._send(json.dumps(final))
            context.done.set()

    async def _send_audio(self, context: _Context, text: str, audio: bytes, rate: int) -> None:
        width = 1 if self.output_format.startswith("ulaw") else 2
        total = len(audio) // width
        starts, durations = char_timings(text, total * 1000 / rate)
        bounds = frame_bounds(total, rate, self.script.frame_ms)
        index = 0
        for number, (start, end) in enumerate(bounds):
            await self._fault_due()
            begin_ms, end_ms = start * 1000 / rate, end * 1000 / rate
            last = number == len(bounds) - 1
            first = index
            while index < len(text) and (last or starts[index] < end_ms):
                index += 1
            alignment = None
            if index > first:
                alignment = {
                    "chars": list(text[first:index]),
                    "charStartTimesMs": [round(s - begin_ms) for s in starts[first:index]],
                    "charDurationsMs": [round(d) for d in durations[first:index]],
                }
            message: dict[str, Any] = {
                "audio": base64.b64encode(audio[start * width : end * width]).decode(),
                "isFinal": None,
                "normalizedAlignment": alignment,
                "alignment": alignment,
            }
            if self.multi:
                message["contextId"] = context.id
            await self._send(json.dumps(message))
            self.conn.frames_sent += 1
            await anyio.sleep(self.script.char_s * (index - first))

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
        await self._send(json.dumps({"message": message, "error": error, "code": 1008}))
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
        transport = _find_transport(self.ws._send)
        if transport is not None:
            transport.abort()
        else:  # another ASGI server: the nearest thing
            await self.ws.close(1011)
        raise _SocketClosed


def _find_transport(send: Any, depth: int = 4) -> asyncio.Transport | None:
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
            _find_transport(cell.cell_contents, depth - 1) if callable(cell.cell_contents) else None
        )
        if found is not None:
            return found
    return None

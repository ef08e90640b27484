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

The sockets' sessions are in ``fake_elevenlabs_socket``; the formats, error
bodies and audio messages with their alignment in ``fake_elevenlabs_wire``.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from .fake_elevenlabs_socket import StreamInputSession
from .fake_elevenlabs_wire import (
    CONTENT_TYPES,
    DEFAULT_FORMAT,
    FORMATS,
    Encoding,
    error_response,
    unsupported,
    validation_error,
)
from .fake_server import scripted_http_error
from .fake_speech import (
    RecordedConnection,
    SpeechScript,
    SpeechServer,
    frame_bounds,
    paced_body,
    sample_width,
    spoken_after_ttfb,
)


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

    def refusal(
        self, key: Any, voice_id: str | None, *, missing_key: str
    ) -> tuple[int, str] | None:
        """(HTTP status, message) refusing this key and voice (None: no voice
        asked), if they are refused; a socket sends the status's error code."""
        if key is None:
            return 401, missing_key
        if key != self.api_key:
            return 401, "Invalid API key"
        if voice_id is not None and voice_id not in self.voices:
            return 404, f"A voice with voice_id {voice_id!r} was not found."
        return None

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
        refused = self.refusal(key, voice_id, missing_key="Missing the xi-api-key header.")
        return None if refused is None else error_response(*refused)

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
        scripted = scripted_http_error(script, {}, error_response)
        if scripted is not None:
            return scripted
        output_format = request.query_params.get("output_format", DEFAULT_FORMAT)
        if output_format not in FORMATS:
            return validation_error(["query", "output_format"], unsupported(output_format))
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            return validation_error(["body", "text"], "Field required")
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
        scripted = scripted_http_error(script, {}, error_response)
        if scripted is not None:
            await websocket.send_denial_response(scripted)
            return
        await websocket.accept()
        with self._lock:
            self.open_connections += 1
        try:
            await StreamInputSession(self, websocket, conn, script, multi=multi).run()
        finally:
            with self._lock:
                self.open_connections -= 1
                if conn.client_closed:
                    self.client_closed_early += 1


async def _http_audio(
    script: SpeechScript, text: str, encoding: Encoding, rate: int
) -> AsyncIterator[bytes]:
    """The raw audio body in frames of the script's length, paced and faulted as scripted."""
    audio = await spoken_after_ttfb(script, text, rate, encoding)
    width = sample_width(encoding)
    bounds = frame_bounds(len(audio) // width, rate, script.frame_ms)
    async for chunk in paced_body(script, text, audio, [0, *(end * width for _, end in bounds)]):
        yield chunk

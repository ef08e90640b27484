"""A fake OpenAI speech endpoint on loopback, speaking real speech.

``POST /v1/audio/speech`` (``base_url`` ends in ``/v1``, as the ``openai`` SDK
wants), ``Authorization: Bearer KEY``, JSON ``{model, voice, input,
instructions, response_format, speed, stream_format}`` as in the SDK's
``SpeechCreateParams``:

- ``response_format: "pcm"`` — raw 24 kHz 16-bit LE mono, streamed in chunks of
  which some have an ODD number of bytes (a client must carry the odd byte to the
  next chunk); ``"wav"`` — a WAV header (with its real sizes) then the same PCM.
  Other formats (``mp3``, the API's default, ``opus``, ``aac``, ``flac``) are
  refused with a 400 naming the ones this fake can encode.
- ``stream_format: "sse"`` — ``data: {"type": "speech.audio.delta", "audio":
  b64}`` events, then ``data: {"type": "speech.audio.done", "usage":
  {input_tokens, output_tokens, total_tokens}}``; refused (400) for ``tts-1`` and
  ``tts-1-hd``, as the SDK's docstring says.
- Errors in OpenAI's JSON (``{"error": {message, type, param, code}}``): 401 for
  a missing or wrong key, 404 ``model_not_found`` for an unknown model, 400
  ``invalid_value`` for an unknown voice, 400 for ``input`` over 4096 characters
  (the message in the real API's pydantic form) or ``speed`` outside 0.25-4.0;
  scripted 429/5xx with ``retry-after``. ``speed`` is validated, not applied.

A ``malformed`` fault sends an SSE line that is not JSON (SSE only); ``drop``
cuts the connection mid-body; ``stall`` stops sending and keeps it open.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .fake_server import scripted_http_error
from .fake_speech import (
    SpeechScript,
    SpeechServer,
    frame_bounds,
    paced_body,
    spoken_after_ttfb,
    wav_header,
)

RATE = 24000
MAX_INPUT = 4096
MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15")
NO_SSE = ("tts-1", "tts-1-hd")
VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova",
    "sage", "shimmer", "verse", "marin", "cedar",
)  # fmt: skip
ENCODABLE = ("pcm", "wav")
ODD_STEPS = (1, -1, 0)  # added to successive chunk sizes: odd, odd, even, ...


def error_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    if status == 429:
        kind, code = "requests", code or "rate_limit_exceeded"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _error(
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    *,
    param: str | None = None,
    code: str | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(status, message, param, code), status_code=status, headers=headers
    )


class FakeOpenAISpeech(SpeechServer):
    vendor = "openai-speech"

    def __init__(self, *scripts: SpeechScript, api_key: str = "test-key") -> None:
        super().__init__(*scripts)
        self.api_key = api_key
        self._ids = itertools.count(1)

    def routes(self) -> Sequence[BaseRoute]:
        return [Route("/v1/audio/speech", self._speech, methods=["POST"])]

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"

    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": self.api_key}

    async def _speech(self, request: Request) -> Response:
        body = await self.record(request)
        headers = {"x-request-id": f"req_fake_speech_{next(self._ids)}"}
        auth = request.headers.get("authorization", "")
        if not auth:
            return _error(401, "You didn't provide an API key.", headers=headers)
        if auth != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided.", code="invalid_api_key")
        problem = invalid_speech_request(body)
        if problem is not None:
            return problem
        script = self.next_script()
        refused = scripted_http_error(script, headers, _error)
        if refused is not None:
            return refused
        text: str = body["input"]
        self.note_text(text)
        response_format = body.get("response_format", "mp3")
        if body.get("stream_format") == "sse":
            events = _sse(script, text, response_format)
            return self.stream(events, headers)
        media = "audio/wav" if response_format == "wav" else "audio/pcm"
        return self.stream(_audio(script, text, response_format), headers, media_type=media)


def invalid_speech_request(body: Any) -> Response | None:
    """The error the real API (or this fake's limits) gives this body, if any."""
    if not isinstance(body, dict):
        return _error(400, "We could not parse the JSON body of your request.")
    for key in ("model", "input", "voice"):
        if key not in body:
            return _error(400, f"Missing required parameter: '{key}'.", param=key)
    model = body["model"]
    if model not in MODELS:
        message = f"The model `{model}` does not exist or you do not have access to it."
        return _error(404, message, code="model_not_found")
    voice = body["voice"]
    if not (voice in VOICES or (isinstance(voice, dict) and isinstance(voice.get("id"), str))):
        supported = ", ".join(f"'{v}'" for v in VOICES)
        message = f"Invalid value: '{voice}'. Supported values are: {supported}."
        return _error(400, message, param="voice", code="invalid_value")
    text = body["input"]
    if not isinstance(text, str) or len(text) > MAX_INPUT:
        message = (
            "[{'type': 'string_too_long', 'loc': ('body', 'input'), 'msg': 'String should "
            f"have at most {MAX_INPUT} characters', 'ctx': {{'max_length': {MAX_INPUT}}}}}]"
        )
        return _error(400, message)
    speed = body.get("speed", 1.0)
    if not isinstance(speed, int | float) or not 0.25 <= speed <= 4.0:
        return _error(400, f"Invalid 'speed': {speed!r}; expected 0.25 to 4.0.", param="speed")
    response_format = body.get("response_format", "mp3")
    if response_format not in ENCODABLE:
        message = (
            f"response_format {response_format!r} is not supported by this fake server; "
            f"use one of {', '.join(ENCODABLE)}"
        )
        return _error(400, message, param="response_format", code="invalid_value")
    if body.get("stream_format") == "sse" and model in NO_SSE:
        message = f"stream_format 'sse' is not supported for model '{model}'."
        return _error(400, message, param="stream_format", code="invalid_value")
    return None


async def _pieces(script: SpeechScript, text: str, response_format: str) -> AsyncIterator[bytes]:
    """The audio in frames, paced and faulted as scripted; pcm frames' sizes
    alternate odd and even."""
    pcm = await spoken_after_ttfb(script, text, RATE)
    if response_format == "wav":
        yield wav_header(len(pcm), RATE)
    samples = len(pcm) // 2
    cuts = [2 * start for start, _ in frame_bounds(samples, RATE, script.frame_ms)][1:]
    if response_format == "pcm":
        cuts = [cut + step for cut, step in zip(cuts, itertools.cycle(ODD_STEPS), strict=False)]
    async for piece in paced_body(script, text, pcm, [0, *cuts, len(pcm)]):
        yield piece


async def _audio(script: SpeechScript, text: str, response_format: str) -> AsyncIterator[bytes]:
    async for piece in _pieces(script, text, response_format):
        yield piece


async def _sse(script: SpeechScript, text: str, response_format: str) -> AsyncIterator[bytes]:
    sent = 0
    fault = script.fault
    async for piece in _pieces(script, text, response_format):
        if fault is not None and fault.kind == "malformed" and fault.after_frames == sent:
            yield b'data: {"type": "speech.audio.delta", "audio": \n\n'
        event = {"type": "speech.audio.delta", "audio": base64.b64encode(piece).decode()}
        yield f"data: {json.dumps(event)}\n\n".encode()
        sent += 1
    tokens_in = max(1, len(text) // 4)
    usage = {"input_tokens": tokens_in, "output_tokens": sent, "total_tokens": tokens_in + sent}
    done = {"type": "speech.audio.done", "usage": usage}
    yield f"data: {json.dumps(done)}\n\n".encode()

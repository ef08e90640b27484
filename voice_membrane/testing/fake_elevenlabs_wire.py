"""The fake ElevenLabs' wire shapes: the output formats it can encode, its error
bodies (HTTP and WebSocket), and the stream-input audio messages with their
per-chunk character alignment."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Literal

from starlette.responses import JSONResponse

from .fake_speech import char_timings, frame_bounds

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
INACTIVITY = (
    "Have not received a new text input within the timeout of {:g} seconds. Streaming input "
    "terminated. Please make sure to either feed the input in the timely manner, or to send "
    'the end of input text (empty string "") when done.'
)
# Also the WebSocket error codes of the same refusals.
ERROR_STATUS = {401: "invalid_api_key", 404: "voice_not_found", 429: "too_many_concurrent_requests"}

# ---------------------------------------------------------------- errors


def error_body(status: int, message: str) -> dict[str, Any]:
    """ElevenLabs' error JSON for an HTTP status."""
    default = "internal_server_error" if status >= 500 else "invalid_request"
    return {"detail": {"status": ERROR_STATUS.get(status, default), "message": message}}


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(status, message), status_code=status, headers=headers)


def validation_error(loc: list[str], message: str) -> JSONResponse:
    """FastAPI's 422 shape (the SDK's ``UnprocessableEntityError`` parses it)."""
    detail = [{"loc": loc, "msg": message, "type": "value_error"}]
    return JSONResponse({"detail": detail}, status_code=422)


def unsupported(output_format: str) -> str:
    """Why ``output_format`` is refused: this fake cannot encode it."""
    return (
        f"output_format {output_format!r} is not supported by this fake server; "
        f"use one of {', '.join(FORMATS)}"
    )


def socket_error(error: str, message: str) -> dict[str, Any]:
    """The error frame the real service sends before closing 1008."""
    return {"message": message, "error": error, "code": 1008}


# ---------------------------------------------------------------- audio messages


@dataclass(frozen=True, slots=True)
class AlignedFrame:
    """One audio message's samples and the characters whose start falls in them."""

    start: int  # first sample
    end: int  # past the last sample
    alignment: dict[str, Any] | None  # None: no character starts here
    chars: int  # how many characters the alignment holds


def aligned_frames(text: str, total_samples: int, rate: int, frame_ms: int) -> list[AlignedFrame]:
    """The audio of ``text`` cut into frames, each with the alignment of the
    characters starting in it, times relative to the frame (as the SDK's
    ``Alignment`` documents); the last frame takes whatever is left, so the
    frames' characters join to ``text``."""
    starts, durations = char_timings(text, total_samples * 1000 / rate)
    bounds = frame_bounds(total_samples, rate, frame_ms)
    frames: list[AlignedFrame] = []
    index = 0
    for number, (start, end) in enumerate(bounds):
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
        frames.append(AlignedFrame(start, end, alignment, index - first))
    return frames


def audio_message(
    audio: bytes, alignment: dict[str, Any] | None, context_id: str | None
) -> dict[str, Any]:
    """A stream-input audio message (``contextId`` on a multi-stream socket)."""
    message: dict[str, Any] = {
        "audio": base64.b64encode(audio).decode(),
        "isFinal": None,
        "normalizedAlignment": alignment,
        "alignment": alignment,
    }
    if context_id is not None:
        message["contextId"] = context_id
    return message


def final_message(context_id: str | None) -> dict[str, Any]:
    """The message after a stream's (or a context's) last audio."""
    final: dict[str, Any] = {"isFinal": True}
    if context_id is not None:
        final["contextId"] = context_id
    return final

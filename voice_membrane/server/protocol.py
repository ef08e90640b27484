"""The WebSocket protocol, version 1 (docs/websocket-protocol.md), sans-I/O.

Client messages are pydantic models discriminated on ``type``, with unknown
fields refused; server events are plain dicts built here so every field name
lives in one place; audio frames carry an ``<II`` header (turn, sequence).
"""

from __future__ import annotations

import json
import struct
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
)

from ..infra.redact import quote, redact

PROTOCOL_VERSION: Final = 1
SESSION_PATH: Final = "/v1/session"
FRAME_MS: Final = 20
MAX_MESSAGE_BYTES: Final = 64 * 1024
MAX_TEXT_CHARS: Final = 4000
MESSAGES_PER_SECOND: Final = 20
START_TIMEOUT_S: Final = 10.0
PCM16_RATES: Final = (16000, 22050, 24000, 48000)

HEADER: Final = struct.Struct("<II")

# Close codes.
CLOSE_NORMAL: Final = 1000
CLOSE_GOING_AWAY: Final = 1001
CLOSE_POLICY: Final = 1008
CLOSE_TOO_BIG: Final = 1009
CLOSE_INTERNAL: Final = 1011
CLOSE_TRY_AGAIN: Final = 1013
CLOSE_UNAUTHORIZED: Final = 4401
CLOSE_IDLE: Final = 4408

ErrorCode = Literal[
    "bad_message",
    "busy",
    "rate_limited",
    "pipeline_not_allowed",
    "slow_client",
    "idle_timeout",
    "draining",
    "full",
    "llm_error",
    "tts_error",
    "internal",
]


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Pcm16Format(_Message):
    encoding: Literal["pcm16"] = "pcm16"
    sample_rate: Literal[16000, 22050, 24000, 48000] = 24000


class MulawFormat(_Message):
    encoding: Literal["mulaw"]
    sample_rate: Literal[8000] = 8000


def _encoding(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("encoding", "pcm16"))  # pcm16 unless told otherwise
    return str(getattr(value, "encoding", "pcm16"))


AudioFormat = Annotated[
    Annotated[Pcm16Format, Tag("pcm16")] | Annotated[MulawFormat, Tag("mulaw")],
    Discriminator(_encoding),
]


class SessionStart(_Message):
    type: Literal["session.start"]
    v: Literal[1] = 1
    pipeline: str | None = Field(None, min_length=1, max_length=100)
    audio: AudioFormat = Field(default_factory=Pcm16Format)
    token: str | None = Field(None, max_length=1000)


class UserMessage(_Message):
    type: Literal["user.message"]
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    # A name as written in the transcript's turn lines: letters, digits, spaces and
    # . ' - only, so no name can hold a separator or tag and forge a turn.
    participant: str | None = Field(None, pattern=r"^\w[\w .'-]{0,99}$")


class Interrupt(_Message):
    type: Literal["interrupt"]


class SessionEnd(_Message):
    type: Literal["session.end"]


ClientMessage = Annotated[
    SessionStart | UserMessage | Interrupt | SessionEnd, Field(discriminator="type")
]
_CLIENT: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)


class BadMessage(ValueError):
    """A client message that cannot be used; the text is one line, safe to send back."""


def parse_client_message(data: str | bytes) -> ClientMessage:
    """One client frame as a message, or ``BadMessage`` saying why not."""
    if isinstance(data, bytes):
        raise BadMessage("binary frames are not accepted: send JSON text")
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, RecursionError):
        raise BadMessage("not JSON") from None
    if not isinstance(raw, dict):
        raise BadMessage("a message is a JSON object with a type")
    try:
        return _CLIENT.validate_python(raw)
    except ValidationError as exc:
        raise BadMessage(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    error = exc.errors(include_url=False, include_input=False)[0]
    top_level = not error["loc"]
    if top_level and error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return f"unknown type: use one of {', '.join(sorted(_TYPES))}"
    # The location without the union's tag (``user.message.text`` reads as ``text``).
    where = ".".join(str(part) for part in error["loc"][1:]) or "message"
    message = error["msg"]
    if len(message) > 200:  # a message may quote the client's input
        message = message[:199] + "…"
    return redact(f"{quote(where)}: {message}")


_TYPES = ("session.start", "user.message", "interrupt", "session.end")


# Server events.


def event(type_: str, **fields: Any) -> str:
    """A server event as the JSON text sent."""
    return json.dumps({"type": type_, **fields}, ensure_ascii=False, separators=(",", ":"))


def error_event(code: ErrorCode, message: str, turn: int | None = None) -> str:
    fields: dict[str, Any] = {"code": code, "message": redact(message)}
    if turn is not None:
        fields["turn"] = turn
    return event("error", **fields)


def pack_frame(turn: int, sequence: int, audio: bytes) -> bytes:
    return HEADER.pack(turn, sequence) + audio


def unpack_frame(frame: bytes) -> tuple[int, int, bytes]:
    """(turn, sequence, audio bytes) of a binary frame."""
    if len(frame) < HEADER.size:
        raise ValueError(f"an audio frame has an {HEADER.size}-byte header, got {len(frame)} bytes")
    turn, sequence = HEADER.unpack_from(frame)
    return turn, sequence, frame[HEADER.size :]

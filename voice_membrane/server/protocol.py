"""The WebSocket protocol, version 1.1 (docs/websocket-protocol.md), sans-I/O.

Client messages are pydantic models discriminated on ``type``, with unknown
fields refused; server events are plain dicts built here so every field name
lives in one place; the server's audio frames carry an ``<II`` header (turn,
sequence), the client's (its voice, 1.1) are raw audio: a WebSocket is ordered
and reliable, so a sequence number would tell the server nothing.
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
    model_validator,
)

from ..infra.redact import quote, redact

PROTOCOL_VERSION: Final = 1
# 1.1: the client's voice (input_audio), listening events; 1.2: the reply's frame_ms
PROTOCOL_MINOR: Final = "1.2"
SESSION_PATH: Final = "/v1/session"
OFFER_PATH: Final = "/v1/webrtc/offer"  # the WebRTC offer (webrtc_offer.py)
FRAME_MS: Final = 20  # the reply's frames unless the client asks for others
# What a client may ask its reply's frames to be (1.2): longer ones cost the
# server less per second of audio (a frame's header, framing and write are per
# frame); at most the pacing batch (pacing.REFILL_S), so no frame passes the lead.
OutputFrameMs = Literal[20, 40, 60]
MAX_MESSAGE_BYTES: Final = 64 * 1024
# The largest event the server sends: a quarter of the 1 MiB a websockets client
# accepts by default, so a long reply or tool result never gets a client dropped.
MAX_EVENT_BYTES: Final = 256 * 1024
MAX_TEXT_CHARS: Final = 4000
MESSAGES_PER_SECOND: Final = 20
START_TIMEOUT_S: Final = 10.0
PCM16_RATES: Final = (16000, 22050, 24000, 48000)
MAX_INPUT_FRAME_S: Final = 0.2  # the most audio one binary frame from the client may hold
# The least a binary frame from the client is charged in its audio budget: a
# frame's cost to the server is mostly per frame, so a shorter one (a file's
# last piece) is taken but counted as this much audio.
MIN_INPUT_FRAME_S: Final = 0.01

HEADER: Final = struct.Struct("<II")

# Close codes.
CLOSE_NORMAL: Final = 1000
CLOSE_GOING_AWAY: Final = 1001
CLOSE_POLICY: Final = 1008
CLOSE_TOO_BIG: Final = 1009
CLOSE_INTERNAL: Final = 1011
CLOSE_TRY_AGAIN: Final = 1013  # draining, full, or the session store unreachable
CLOSE_UNAUTHORIZED: Final = 4401
CLOSE_IDLE: Final = 4408
CLOSE_SUPERSEDED: Final = 4409  # a newer connection resumed the session
CLOSE_RESUME_FAILED: Final = 4410  # unknown, expired, or the wrong resume token

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
    "stt_error",
    "internal",
    "resume_failed",
    "superseded",
    "store_unavailable",
]


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Pcm16Format(_Message):
    encoding: Literal["pcm16"] = "pcm16"
    sample_rate: Literal[16000, 22050, 24000, 48000] = 24000
    frame_ms: OutputFrameMs = FRAME_MS


class MulawFormat(_Message):
    encoding: Literal["mulaw"]
    sample_rate: Literal[8000] = 8000
    frame_ms: OutputFrameMs = FRAME_MS


def _encoding(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("encoding", "pcm16"))  # pcm16 unless told otherwise
    return str(getattr(value, "encoding", "pcm16"))


AudioFormat = Annotated[
    Annotated[Pcm16Format, Tag("pcm16")] | Annotated[MulawFormat, Tag("mulaw")],
    Discriminator(_encoding),
]


class InputAudio(_Message):
    """The client's voice, as it will send it in binary frames (1.1)."""

    encoding: Literal["pcm16", "mulaw"] = "pcm16"
    sample_rate: Literal[8000, 16000, 24000, 48000] = 16000
    frame_ms: int = Field(20, ge=10, le=100, multiple_of=10)

    @model_validator(mode="after")
    def _mulaw_is_8k(self) -> InputAudio:
        if self.encoding == "mulaw" and self.sample_rate != 8000:
            raise ValueError("mulaw input is 8000 Hz")
        return self

    @property
    def bytes_per_sample(self) -> int:
        return 1 if self.encoding == "mulaw" else 2


TurnTaking = Literal["vad", "push_to_talk"]


class SessionStart(_Message):
    type: Literal["session.start"]
    v: Literal[1] = 1
    pipeline: str | None = Field(None, min_length=1, max_length=100)
    audio: AudioFormat = Field(default_factory=Pcm16Format)
    token: str | None = Field(None, max_length=1000)
    input_audio: InputAudio | None = None
    turn_taking: TurnTaking = "vad"


class SessionResume(_Message):
    """Instead of ``session.start``: go on with a session whose connection dropped."""

    type: Literal["session.resume"]
    v: Literal[1] = 1
    session: str = Field(max_length=64, pattern=r"^s[a-z2-7]{16}$")
    resume_token: str = Field(min_length=1, max_length=100)
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


class InputStart(_Message):
    """Push to talk: the user pressed (the audio from now on is theirs)."""

    type: Literal["input.start"]


class InputEnd(_Message):
    """Push to talk: the user released (their utterance is over)."""

    type: Literal["input.end"]


ClientMessage = Annotated[
    SessionStart | SessionResume | UserMessage | Interrupt | SessionEnd | InputStart | InputEnd,
    Field(discriminator="type"),
]
_CLIENT: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)


class BadMessage(ValueError):
    """A client message that cannot be used; the text is one line, safe to send back."""


def parse_client_message(data: str | bytes) -> ClientMessage:
    """One client frame as a message, or ``BadMessage`` saying why not."""
    if isinstance(data, bytes):
        raise BadMessage(
            "binary frames are audio: send them after a session.start with input_audio"
        )
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


_TYPES = (
    "session.start",
    "session.resume",
    "user.message",
    "interrupt",
    "session.end",
    "input.start",
    "input.end",
)


# Server events.


def event(type_: str, **fields: Any) -> str:
    """A server event as the JSON text sent, at most ``MAX_EVENT_BYTES`` of UTF-8
    (``bounded_event``). Every event is made here, and redacted here (no key by
    value or by shape, whatever field holds it) before it is cut, so a cut never
    leaves part of a key."""
    text = redact(_dumps({"type": type_, **fields}))
    if len(text) <= MAX_EVENT_BYTES // 4:  # (at most 4 bytes a character: surely fits)
        return text
    try:
        redacted = json.loads(text)
    except json.JSONDecodeError:  # a known value that ends inside an escape
        return redact(bounded_event(text, type_, fields, MAX_EVENT_BYTES))
    del redacted["type"]
    return bounded_event(text, type_, redacted, MAX_EVENT_BYTES)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def bounded_event(text: str, type_: str, fields: dict[str, Any], limit: int) -> str:
    """``text`` (the event ``type_`` with ``fields``) if it fits ``limit`` bytes; else
    the same event with ``"truncated": true`` and its longest strings cut, each
    ending in ``… [N characters not sent]``, and if that is not enough (a great many
    short strings) its largest fields replaced by ``[not sent: N bytes]``."""
    size = len(text.encode())
    if size <= limit:
        return text
    out = {**fields, "truncated": True}
    cut: dict[tuple[Any, ...], str] = {}  # path → the original string
    for _ in range(16):
        path, value = _longest_string(out, ())
        if path is None or len(value) < 64:
            break
        original = cut.setdefault(path, value)
        keep = max(0, len(value) - (size - limit) - 64)
        _put(out, path, original[:keep] + f"… [{len(original) - keep:,} characters not sent]")
        text = _dumps({"type": type_, **out})
        size = len(text.encode())
        if size <= limit:
            return text
    sizes = sorted(((len(_dumps(v)), k) for k, v in out.items() if k != "turn"), reverse=True)
    for field_size, key in sizes:
        out[key] = f"[not sent: {field_size:,} bytes]"
        text = _dumps({"type": type_, **out})
        if len(text.encode()) <= limit:
            break
    return text


def _longest_string(value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...] | None, str]:
    best: tuple[tuple[Any, ...] | None, str] = (None, "")
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if isinstance(item, str):
            if len(item) > len(best[1]):
                best = ((*path, key), item)
        elif isinstance(item, dict | list | tuple):
            found = _longest_string(item, (*path, key))
            if len(found[1]) > len(best[1]):
                best = found
    return best


def _put(value: Any, path: tuple[Any, ...], text: str) -> None:
    """Set the string at ``path``, copying the containers on the way (the caller's
    own dicts and lists are not changed)."""
    *inner, last = path
    for key in inner:
        child = value[key]
        copied = dict(child) if isinstance(child, dict) else list(child)
        value[key] = copied
        value = copied
    value[last] = text


def error_event(
    code: ErrorCode, message: str, turn: int | None = None, kind: str | None = None
) -> str:
    """``kind``: an ``llm_error``'s own kind (``stalled``, ``timeout``, …)."""
    fields: dict[str, Any] = {"code": code, "message": redact(message)}
    if turn is not None:
        fields["turn"] = turn
    if kind is not None:
        fields["kind"] = kind
    return event("error", **fields)


def pack_frame(turn: int, sequence: int, audio: bytes) -> bytes:
    return HEADER.pack(turn, sequence) + audio


def unpack_frame(frame: bytes) -> tuple[int, int, bytes]:
    """(turn, sequence, audio bytes) of a binary frame."""
    if len(frame) < HEADER.size:
        raise ValueError(f"an audio frame has an {HEADER.size}-byte header, got {len(frame)} bytes")
    turn, sequence = HEADER.unpack_from(frame)
    return turn, sequence, frame[HEADER.size :]


def audio_bytes_per_second(encoding: str, sample_rate: int, frame_ms: int = FRAME_MS) -> int:
    """What a session's audio takes on the wire each second: its frames with their
    header and the WebSocket's own (4 bytes for frames of 126 bytes to 64 KiB)."""
    frames = 1000 // frame_ms
    audio = sample_rate * frame_ms // 1000 * (1 if encoding == "mulaw" else 2)
    return frames * (audio + HEADER.size + 4)

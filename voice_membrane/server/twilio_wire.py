"""Twilio Media Streams, the bidirectional WebSocket protocol, sans-I/O.

What Twilio sends (``connected``, ``start``, ``media``, ``dtmf``, ``mark``,
``stop``) is parsed into frozen models; what we send (``media``, ``mark``,
``clear``) is built here, so every field name lives in one place. Shapes follow
https://www.twilio.com/docs/voice/media-streams/websocket-messages.

Twilio adds fields over time: unknown fields are ignored, but the ones we use
are validated, and anything else wrong (not JSON, an unknown event, a payload
that is not base64, a format other than μ-law 8 kHz mono) raises
``BadTwilioMessage`` with one line saying why.
"""

from __future__ import annotations

import base64
import functools
import json
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from ..infra.redact import quote, redact
from .carrier_wire import MAX_PAYLOAD_BYTES as MAX_PAYLOAD_BYTES
from .carrier_wire import (
    BadCarrierMessage,
    CallAudio,
    CallEvent,
    CallStart,
    HungUp,
    Ignored,
    KeyPress,
    Payload,
    Played,
    UnsupportedFormat,
    parse_json_event,
)

TWILIO_PATH: Final = "/v1/twilio"
SAMPLE_RATE: Final = 8000
ENCODING: Final = "audio/x-mulaw"
FRAME_MS: Final = 20  # what Twilio sends, and what we send it
FRAME_BYTES: Final = SAMPLE_RATE * FRAME_MS // 1000  # μ-law: one byte a sample
EVENTS: Final = ("connected", "start", "media", "dtmf", "mark", "stop")


class BadTwilioMessage(BadCarrierMessage):
    """A message from Twilio that cannot be used; the text is one line."""


class UnsupportedTwilioFormat(BadTwilioMessage, UnsupportedFormat):
    """A ``start`` whose media format is not μ-law 8 kHz mono."""


class _Twilio(BaseModel):
    # Lenient on fields Twilio may add, strict on those we read.
    model_config = ConfigDict(extra="ignore", frozen=True)


Sid = Annotated[str, Field(min_length=1, max_length=64)]


class Connected(_Twilio):
    event: Literal["connected"]
    protocol: str | None = None
    version: str | None = None


class MediaFormat(_Twilio):
    encoding: str
    sampleRate: int
    channels: int


class StartInfo(_Twilio):
    streamSid: Sid
    accountSid: str | None = Field(None, max_length=64)
    callSid: str | None = Field(None, max_length=64)
    tracks: tuple[str, ...] = ("inbound",)
    mediaFormat: MediaFormat
    customParameters: dict[str, str] = Field(default_factory=dict, max_length=64)


class Start(_Twilio):
    event: Literal["start"]
    sequenceNumber: int | None = None
    streamSid: str | None = None
    start: StartInfo

    @model_validator(mode="after")
    def _mulaw_8k_mono(self) -> Start:
        f = self.start.mediaFormat
        if (f.encoding, f.sampleRate, f.channels) != (ENCODING, SAMPLE_RATE, 1):
            raise ValueError(
                f"unsupported media format {quote(f.encoding, 40)} {f.sampleRate} Hz "
                f"{f.channels} channel(s): only {ENCODING} {SAMPLE_RATE} Hz mono"
            )
        return self

    @property
    def stream_sid(self) -> str:
        return self.start.streamSid


class MediaInfo(_Twilio):
    track: str = "inbound"
    chunk: int | None = None
    timestamp: int | None = None  # ms since the stream started
    payload: Payload


class Media(_Twilio):
    event: Literal["media"]
    sequenceNumber: int | None = None
    streamSid: str | None = None
    media: MediaInfo


class DtmfInfo(_Twilio):
    track: str | None = None
    digit: str = Field(pattern=r"^[0-9*#A-Da-dw]$")


class Dtmf(_Twilio):
    event: Literal["dtmf"]
    sequenceNumber: int | None = None
    streamSid: str | None = None
    dtmf: DtmfInfo


class MarkInfo(_Twilio):
    name: str = Field(max_length=256)


class Mark(_Twilio):
    event: Literal["mark"]
    sequenceNumber: int | None = None
    streamSid: str | None = None
    mark: MarkInfo


class StopInfo(_Twilio):
    accountSid: str | None = None
    callSid: str | None = None


class Stop(_Twilio):
    event: Literal["stop"]
    sequenceNumber: int | None = None
    streamSid: str | None = None
    stop: StopInfo | None = None


TwilioMessage = Annotated[
    Connected | Start | Media | Dtmf | Mark | Stop, Field(discriminator="event")
]
_MESSAGE: TypeAdapter[TwilioMessage] = TypeAdapter(TwilioMessage)


def parse_twilio_message(data: str | bytes) -> TwilioMessage:
    """One frame from Twilio as a message, or ``BadTwilioMessage`` saying why not."""
    return parse_json_event(data, _MESSAGE, EVENTS, "Twilio", BadTwilioMessage, _invalid)


def _invalid(event: str, exc: ValidationError | RecursionError) -> BadTwilioMessage:
    why = _describe(event, exc)
    if why.startswith("unsupported media format"):
        return UnsupportedTwilioFormat(why)
    return BadTwilioMessage(why)


def _describe(event: str, exc: ValidationError | RecursionError) -> str:
    if isinstance(exc, RecursionError):
        return f"{event}: nested too deeply"
    error = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in error["loc"][1:])  # without the union's tag
    message = str(error["msg"]).removeprefix("Value error, ")
    if len(message) > 200:
        message = message[:199] + "…"
    # A check of the whole message (the media format) says what it is on its own.
    return redact(f"{event}: {quote(where)}: {message}" if where else message)


# What we send Twilio.


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


def media_message(stream_sid: str, ulaw: bytes) -> str:
    """Audio for the caller: μ-law 8 kHz bytes, no header."""
    # 50 a second per call: the text _dumps gives, from the stream's head (a
    # base64 payload needs no escaping), at a tenth of its CPU
    return _media_head(stream_sid) + base64.b64encode(ulaw).decode("ascii") + '"}}'


@functools.lru_cache(maxsize=1024)
def _media_head(stream_sid: str) -> str:
    return '{"event":"media","streamSid":' + json.dumps(stream_sid) + ',"media":{"payload":"'


def mark_message(stream_sid: str, name: str) -> str:
    """Twilio echoes a mark of this name once the audio sent before it has played."""
    return _dumps({"event": "mark", "streamSid": stream_sid, "mark": {"name": name}})


def clear_message(stream_sid: str) -> str:
    """Empty Twilio's playback buffer (it echoes the marks still pending)."""
    return _dumps({"event": "clear", "streamSid": stream_sid})


class TwilioWire:
    """Twilio Media Streams as a ``carrier_wire.CarrierWire``."""

    name: Final = "twilio"
    path: Final = TWILIO_PATH

    def parse(self, data: str | bytes) -> CallEvent:
        message = parse_twilio_message(data)
        if isinstance(message, Media):
            return CallAudio(message.media.payload)
        if isinstance(message, Mark):
            return Played(message.mark.name)
        if isinstance(message, Dtmf):
            return KeyPress(message.dtmf.digit)
        if isinstance(message, Start):
            info = message.start
            return CallStart(info.streamSid, info.callSid, info.customParameters)
        if isinstance(message, Stop):
            return HungUp()
        return Ignored(message.event)

    def media(self, stream_id: str, ulaw: bytes) -> str:
        return media_message(stream_id, ulaw)

    def mark(self, stream_id: str, name: str) -> str:
        return mark_message(stream_id, name)

    def clear(self, stream_id: str) -> str:
        return clear_message(stream_id)


TWILIO: Final = TwilioWire()

"""Telnyx Media Streaming over WebSocket, bidirectional RTP mode, sans-I/O.

Telnyx sends ``connected``, ``start`` (``stream_id``, the call's
``call_control_id``, ``custom_parameters``, ``media_format``), ``media``
(base64 RTP payloads, no RTP header), ``dtmf``, ``mark`` (a mark we sent, once
the audio before it has played, or at once on ``clear``), ``error`` and
``stop``; it takes ``media``, ``mark`` and ``clear``. Shapes follow Telnyx's
AsyncAPI specification of the stream
(https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket)
and the TeXML ``<Stream>`` verb
(https://developers.telnyx.com/docs/voice/programmable-voice/texml-verbs/stream).

Only PCMU (μ-law) at 8 kHz, mono, is taken: ``serve``'s TeXML asks Telnyx for
it both ways (``codec``, ``bidirectionalCodec``); a ``start`` declaring
anything else (PCMA, G722, OPUS, AMR-WB, L16, 16 kHz) ends the call in one line.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ..infra.redact import quote, redact
from .carrier_wire import (
    FRAME_BYTES,
    SAMPLE_RATE,
    CallAudio,
    CallEvent,
    CallStart,
    CarrierNotice,
    HungUp,
    Ignored,
    KeyPress,
    Payload,
    Played,
    UnsupportedFormat,
    parse_json_event,
)

TELNYX_PATH: Final = "/v1/telnyx"
ENCODING: Final = "PCMU"
EVENTS: Final = ("connected", "start", "media", "dtmf", "mark", "error", "stop")
_SILENCE: Final = b"\xff"  # μ-law for 0


class _Telnyx(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


Id = Annotated[str, Field(min_length=1, max_length=128)]


class Connected(_Telnyx):
    event: Literal["connected"]


class MediaFormat(_Telnyx):
    encoding: str = Field(max_length=40)
    sample_rate: int
    channels: int = 1


class StartInfo(_Telnyx):
    call_control_id: str | None = Field(None, max_length=128)
    custom_parameters: dict[str, str] = Field(default_factory=dict, max_length=64)
    media_format: MediaFormat


class Start(_Telnyx):
    event: Literal["start"]
    stream_id: Id
    start: StartInfo


class MediaInfo(_Telnyx):
    track: str = "inbound"
    payload: Payload


class Media(_Telnyx):
    event: Literal["media"]
    media: MediaInfo


class DtmfInfo(_Telnyx):
    digit: str = Field(pattern=r"^[0-9*#A-Da-d]$")


class Dtmf(_Telnyx):
    event: Literal["dtmf"]
    dtmf: DtmfInfo


class MarkInfo(_Telnyx):
    name: str = Field(max_length=256)


class Mark(_Telnyx):
    event: Literal["mark"]
    mark: MarkInfo


class ErrorInfo(_Telnyx):
    code: int | str | None = None
    title: str | None = Field(None, max_length=200)
    detail: str | None = Field(None, max_length=500)


class Error(_Telnyx):
    event: Literal["error"]
    payload: ErrorInfo = ErrorInfo()


class Stop(_Telnyx):
    event: Literal["stop"]


TelnyxMessage = Annotated[
    Connected | Start | Media | Dtmf | Mark | Error | Stop, Field(discriminator="event")
]
_MESSAGE: TypeAdapter[TelnyxMessage] = TypeAdapter(TelnyxMessage)


def parse_telnyx_message(data: str | bytes) -> TelnyxMessage:
    """One frame from Telnyx as a message, or ``BadCarrierMessage`` saying why not."""
    return parse_json_event(data, _MESSAGE, EVENTS, "Telnyx")


class TelnyxWire:
    """Telnyx's media stream as a ``carrier_wire.CarrierWire``."""

    name: Final = "telnyx"
    path: Final = TELNYX_PATH

    def parse(self, data: str | bytes) -> CallEvent:
        message = parse_telnyx_message(data)
        if isinstance(message, Media):
            if message.media.track != "inbound":
                return Ignored("media " + message.media.track[:20])  # (both_tracks: ours)
            return CallAudio(message.media.payload)
        if isinstance(message, Mark):
            return Played(message.mark.name)
        if isinstance(message, Dtmf):
            return KeyPress(message.dtmf.digit)
        if isinstance(message, Start):
            info = message.start
            f = info.media_format
            if (f.encoding.upper(), f.sample_rate, f.channels) != (ENCODING, SAMPLE_RATE, 1):
                raise UnsupportedFormat(
                    f"unsupported media format {quote(f.encoding, 40)} {f.sample_rate} Hz "
                    f"{f.channels} channel(s): only {ENCODING} {SAMPLE_RATE} Hz mono"
                )
            return CallStart(message.stream_id, info.call_control_id, info.custom_parameters)
        if isinstance(message, Stop):
            return HungUp()
        if isinstance(message, Error):
            e = message.payload
            said = " ".join(str(part) for part in (e.code, e.title, e.detail) if part is not None)
            return CarrierNotice(redact(said or "an error with no detail"))
        return Ignored(message.event)

    def media(self, stream_id: str, ulaw: bytes) -> str:
        # Telnyx takes 20 ms to 30 s a message: a shorter tail is padded with silence.
        if len(ulaw) < FRAME_BYTES:
            ulaw += _SILENCE * (FRAME_BYTES - len(ulaw))
        payload = base64.b64encode(ulaw).decode("ascii")
        return '{"event":"media","media":{"payload":"' + payload + '"}}'

    def mark(self, stream_id: str, name: str) -> str:
        return _dumps({"event": "mark", "mark": {"name": name}})

    def clear(self, stream_id: str) -> str:
        return _dumps({"event": "clear"})


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


TELNYX: Final = TelnyxWire()

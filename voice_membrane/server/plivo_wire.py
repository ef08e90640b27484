"""Plivo Audio Streams, bidirectional, sans-I/O.

Plivo sends ``start`` (``callId``, ``streamId``, ``mediaFormat``, and the
Stream XML's ``extraHeaders`` as one ``extra_headers`` string), ``media``,
``dtmf``, ``playedStream`` (a ``checkpoint`` we sent, once the audio before
it has played; none for audio a ``clearAudio`` dropped) and ``clearedAudio``;
it takes ``playAudio``, ``checkpoint`` and ``clearAudio``. Shapes follow
Plivo's protocol reference
(https://www.plivo.com/docs/voice-agents/audio-streaming/concepts/audio-streaming-reference)
and the Stream XML element (https://docs.plivo.com/docs/voice/xml/audiostream).
A ``stop`` is taken as the hang-up too, though Plivo documents none: the
socket's close is the end of the call.

Only μ-law 8 kHz is taken (``serve``'s XML asks for ``audio/x-mulaw;rate=8000``);
a ``start`` declaring L16 (8 or 16 kHz) ends the call in one line.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ..infra.redact import quote
from .carrier_wire import (
    SAMPLE_RATE,
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
from .twilio_call_token import CALL_TOKEN_PARAMETER

PLIVO_PATH: Final = "/v1/plivo"
ENCODING: Final = "audio/x-mulaw"
EVENTS: Final = ("start", "media", "dtmf", "playedStream", "clearedAudio", "stop")
# extraHeaders take letters and digits only: the call token's name there.
TOKEN_HEADER: Final = "calltoken"
_PAIR = re.compile(r"^([A-Za-z0-9]{1,64})=([A-Za-z0-9]{0,256})$")


class _Plivo(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


Id = Annotated[str, Field(min_length=1, max_length=128)]


class MediaFormat(_Plivo):
    encoding: str = Field(max_length=40)
    sampleRate: int


class StartInfo(_Plivo):
    callId: str | None = Field(None, max_length=128)
    streamId: Id
    mediaFormat: MediaFormat


class Start(_Plivo):
    event: Literal["start"]
    start: StartInfo
    extra_headers: str = Field("", max_length=1024)


class MediaInfo(_Plivo):
    track: str = "inbound"
    payload: Payload


class Media(_Plivo):
    event: Literal["media"]
    media: MediaInfo


class DtmfInfo(_Plivo):
    digit: str = Field(pattern=r"^[0-9*#A-Da-d]$")


class Dtmf(_Plivo):
    event: Literal["dtmf"]
    dtmf: DtmfInfo


class PlayedStream(_Plivo):
    event: Literal["playedStream"]
    name: str = Field(max_length=256)


class ClearedAudio(_Plivo):
    event: Literal["clearedAudio"]


class Stop(_Plivo):
    event: Literal["stop"]


PlivoMessage = Annotated[
    Start | Media | Dtmf | PlayedStream | ClearedAudio | Stop, Field(discriminator="event")
]
_MESSAGE: TypeAdapter[PlivoMessage] = TypeAdapter(PlivoMessage)


def parse_plivo_message(data: str | bytes) -> PlivoMessage:
    """One frame from Plivo as a message, or ``BadCarrierMessage`` saying why not."""
    return parse_json_event(data, _MESSAGE, EVENTS, "Plivo")


def extra_headers(text: str) -> dict[str, str]:
    """The Stream XML's ``extraHeaders`` as Plivo hands them back: ``k=v`` pairs
    of letters and digits, joined by ``,`` (as written) or ``;`` (as Plivo's
    reference shows them); anything else in it is left out."""
    pairs = (_PAIR.match(part.strip()) for part in re.split(r"[,;]", text)[:64])
    return {m[1]: m[2] for m in pairs if m is not None}


class PlivoWire:
    """Plivo's Audio Streams as a ``carrier_wire.CarrierWire``."""

    name: Final = "plivo"
    path: Final = PLIVO_PATH

    def parse(self, data: str | bytes) -> CallEvent:
        message = parse_plivo_message(data)
        if isinstance(message, Media):
            if message.media.track != "inbound":
                return Ignored("media " + message.media.track[:20])
            return CallAudio(message.media.payload)
        if isinstance(message, PlayedStream):
            return Played(message.name)
        if isinstance(message, Dtmf):
            return KeyPress(message.dtmf.digit)
        if isinstance(message, Start):
            info = message.start
            f = info.mediaFormat
            if (f.encoding.lower(), f.sampleRate) != (ENCODING, SAMPLE_RATE):
                raise UnsupportedFormat(
                    f"unsupported media format {quote(f.encoding, 40)} {f.sampleRate} Hz: "
                    f"only {ENCODING} {SAMPLE_RATE} Hz"
                )
            parameters = extra_headers(message.extra_headers)
            if TOKEN_HEADER in parameters:  # (the common name: phone_call redeems it)
                parameters[CALL_TOKEN_PARAMETER] = parameters.pop(TOKEN_HEADER)
            return CallStart(info.streamId, info.callId, parameters)
        if isinstance(message, Stop):
            return HungUp()
        return Ignored(message.event)

    def media(self, stream_id: str, ulaw: bytes) -> str:
        payload = base64.b64encode(ulaw).decode("ascii")
        return (
            '{"event":"playAudio","media":{"contentType":"audio/x-mulaw","sampleRate":8000,'
            f'"payload":"{payload}"}},"streamId":{json.dumps(stream_id)}}}'
        )

    def mark(self, stream_id: str, name: str) -> str:
        return _dumps({"event": "checkpoint", "streamId": stream_id, "name": name})

    def clear(self, stream_id: str) -> str:
        return _dumps({"event": "clearAudio", "streamId": stream_id})


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


PLIVO: Final = PlivoWire()

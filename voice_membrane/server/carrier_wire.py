"""What every phone carrier's media stream says, whatever its wire: sans-I/O.

A carrier (Twilio, Telnyx, Plivo) opens a WebSocket to the server and speaks
its own JSON dialect over it; each dialect's module (``twilio_wire``,
``telnyx_wire``, ``plivo_wire``) parses a frame into one of the events below
and builds what the server sends back. The call (``phone_call.PhoneCall``)
and its sink (``phone_sink.PhoneSink``) see only these, so a carrier is one
wire module, one upgrade check and one route, nothing more.

The events: the stream's ``CallStart`` (its ids, the audio format, the custom
parameters the answer document gave it), the caller's ``CallAudio``, a
``Played`` checkpoint (the carrier's echo of a mark we sent once the audio
before it has played), a ``KeyPress``, ``HungUp``, a ``CarrierNotice`` (the
carrier reporting an error of its own: logged) and ``Ignored`` (a message the
protocol has that the call needs nothing from, e.g. ``connected``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Protocol, TypeVar

from pydantic import BeforeValidator, TypeAdapter, ValidationError

from ..infra.redact import quote, redact
from .protocol import BadMessage

# What the sink sends and the listener hears: G.711 μ-law at 8 kHz, the phone
# network's own (every carrier here speaks it; the others are refused at start).
SAMPLE_RATE: Final = 8000
FRAME_MS: Final = 20
FRAME_BYTES: Final = SAMPLE_RATE * FRAME_MS // 1000  # μ-law: one byte a sample
# A carrier's media message is 20 ms; a whole second is already hostile.
MAX_PAYLOAD_BYTES: Final = SAMPLE_RATE


def _decode_payload(value: Any) -> bytes:
    if not isinstance(value, str):
        raise ValueError("the payload is a base64 string")
    if len(value) > (MAX_PAYLOAD_BYTES * 4) // 3 + 4:
        raise ValueError(f"the payload is over {MAX_PAYLOAD_BYTES} bytes")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the payload is not base64") from None


# A base64 audio payload in a carrier's JSON (pydantic field), decoded and bounded.
Payload = Annotated[bytes, BeforeValidator(_decode_payload)]


class BadCarrierMessage(BadMessage):
    """A message from the carrier that cannot be used; the text is one line."""


class UnsupportedFormat(BadCarrierMessage):
    """A ``start`` declaring audio the server does not speak: the call ends."""


@dataclass(frozen=True, slots=True)
class CallStart:
    stream_id: str
    call_id: str | None  # the carrier's id of the call (Twilio's callSid, …)
    parameters: Mapping[str, str] = field(default_factory=dict)  # the answer's custom ones


@dataclass(frozen=True, slots=True)
class CallAudio:
    audio: bytes  # μ-law 8 kHz, no header


@dataclass(frozen=True, slots=True)
class Played:
    name: str  # a mark (checkpoint) we sent: the audio before it has played


@dataclass(frozen=True, slots=True)
class KeyPress:
    digit: str


@dataclass(frozen=True, slots=True)
class HungUp:
    pass


@dataclass(frozen=True, slots=True)
class CarrierNotice:
    text: str  # one line, the carrier's own error report (no secret in it)


@dataclass(frozen=True, slots=True)
class Ignored:
    event: str  # what it was (``connected``, …)


CallEvent = CallStart | CallAudio | Played | KeyPress | HungUp | CarrierNotice | Ignored


class CarrierWire(Protocol):
    """One carrier's dialect: parse what it sends, build what it takes."""

    @property
    def name(self) -> str:
        """The log's and the sink's name for it ("twilio")."""
        ...

    @property
    def path(self) -> str:
        """The WebSocket route, "/v1/twilio"."""
        ...

    def parse(self, data: str | bytes) -> CallEvent:
        """One frame as an event; ``BadCarrierMessage`` (``UnsupportedFormat`` for
        a start the server cannot take) saying why not, in one line."""
        ...

    def media(self, stream_id: str, ulaw: bytes) -> str:
        """Audio for the caller: μ-law 8 kHz bytes."""
        ...

    def mark(self, stream_id: str, name: str) -> str:
        """A checkpoint the carrier sends back (``Played``) once the audio before
        it has played, and at once, unplayed, on a clear."""
        ...

    def clear(self, stream_id: str) -> str:
        """Empty the carrier's playback buffer."""
        ...


M = TypeVar("M")


def parse_json_event(
    data: str | bytes,
    adapter: TypeAdapter[M],
    events: tuple[str, ...],
    carrier: str,
    bad: type[BadCarrierMessage] = BadCarrierMessage,
    invalid: Callable[[str, ValidationError | RecursionError], BadCarrierMessage] | None = None,
) -> M:
    """One JSON frame of ``carrier``'s as one of ``adapter``'s messages (tagged
    by their ``event``), or ``bad`` saying in one line why not (``invalid``: the
    carrier's own word on a message of a known event its model refused)."""
    if isinstance(data, bytes):
        raise bad(f"binary frame: {carrier} sends JSON text")
    try:  # pydantic's own parser, the fast path of a call's 50 messages a second
        return adapter.validate_json(data)
    except (ValidationError, RecursionError):
        pass  # said below, step by step
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):  # (ValueError: also digits past int's limit)
        raise bad("not JSON") from None
    if not isinstance(raw, dict):
        raise bad("a message is a JSON object with an event")
    event = raw.get("event")
    if event not in events:
        shown = quote(str(event)[:40]) if isinstance(event, str) else "none"
        raise bad(f"unknown event {shown}: expected one of {', '.join(events)}")
    try:
        return adapter.validate_python(raw)
    except (ValidationError, RecursionError) as exc:
        raise (invalid or _invalid)(event, exc) from None


def _invalid(event: str, exc: ValidationError | RecursionError) -> BadCarrierMessage:
    return BadCarrierMessage(_describe(event, exc))


def _describe(event: str, exc: ValidationError | RecursionError) -> str:
    if isinstance(exc, RecursionError):
        return f"{event}: nested too deeply"
    error = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in error["loc"][1:])  # without the union's tag
    message = str(error["msg"]).removeprefix("Value error, ")[:200]
    return redact(f"{event}: {quote(where)}: {message}" if where else f"{event}: {message}")

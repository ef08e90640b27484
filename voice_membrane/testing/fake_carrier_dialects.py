"""What a fake carrier says and reads on a media stream, one class per carrier,
written here from the vendors' documentation on its own (not with the server's
``*_wire`` modules), so the fake and the server check each other.

- Twilio Media Streams: https://www.twilio.com/docs/voice/media-streams/websocket-messages
- Telnyx media streaming: https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket
- Plivo Audio Streams: https://www.plivo.com/docs/voice-agents/audio-streaming/concepts/audio-streaming-reference
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol

# What the fake reads from the server: ("media", μ-law bytes), ("mark", name),
# ("clear", None), or None (anything else, kept as is for the test to see).
Heard = tuple[str, Any] | None


class Dialect(Protocol):
    # On a clear: the pending marks sent back at once (Twilio, Telnyx), or dropped
    # and the clear acknowledged (Plivo's clearedAudio: ``cleared``).
    returns_marks_on_clear: bool

    def connected(self) -> dict[str, Any] | None: ...

    def cleared(self) -> dict[str, Any] | None: ...

    def start(
        self, ids: Mapping[str, str], parameters: Mapping[str, str], media_format: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    def media(self, ulaw: bytes, chunk: int) -> dict[str, Any]: ...

    def dtmf(self, digit: str) -> dict[str, Any]: ...

    def mark(self, name: str) -> dict[str, Any]: ...

    def stop(self, ids: Mapping[str, str]) -> dict[str, Any] | None:
        """What a hang-up sends before the close (None: nothing)."""
        ...

    def stamp(self, message: dict[str, Any], sequence: int, stream_id: str) -> dict[str, Any]:
        """The message as it goes out: with its sequence number and stream id."""
        ...

    def read(self, message: dict[str, Any], stream_id: str) -> Heard: ...


class TwilioDialect:
    returns_marks_on_clear = True

    def cleared(self) -> dict[str, Any] | None:
        return None

    MULAW_8K = MappingProxyType({"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1})

    def connected(self) -> dict[str, Any]:
        return {"event": "connected", "protocol": "Call", "version": "1.0.0"}

    def start(
        self, ids: Mapping[str, str], parameters: Mapping[str, str], media_format: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {
            "event": "start",
            "start": {
                "accountSid": ids["account"],
                "streamSid": ids["stream"],
                "callSid": ids["call"],
                "tracks": ["inbound"],
                "mediaFormat": dict(media_format),
                "customParameters": dict(parameters),
            },
        }

    def media(self, ulaw: bytes, chunk: int) -> dict[str, Any]:
        return {
            "event": "media",
            "media": {
                "track": "inbound",
                "chunk": str(chunk),
                "timestamp": str((chunk - 1) * 20),
                "payload": base64.b64encode(ulaw).decode("ascii"),
            },
        }

    def dtmf(self, digit: str) -> dict[str, Any]:
        return {"event": "dtmf", "dtmf": {"track": "inbound_track", "digit": digit}}

    def mark(self, name: str) -> dict[str, Any]:
        return {"event": "mark", "mark": {"name": name}}

    def stop(self, ids: Mapping[str, str]) -> dict[str, Any]:
        return {"event": "stop", "stop": {"accountSid": ids["account"], "callSid": ids["call"]}}

    def stamp(self, message: dict[str, Any], sequence: int, stream_id: str) -> dict[str, Any]:
        return {**message, "sequenceNumber": str(sequence), "streamSid": stream_id}

    def read(self, message: dict[str, Any], stream_id: str) -> Heard:
        if message.get("streamSid") != stream_id:
            return None  # Twilio drops a message for another stream
        return _read(message)


class TelnyxDialect:
    returns_marks_on_clear = True

    def cleared(self) -> dict[str, Any] | None:
        return None

    PCMU_8K = MappingProxyType({"encoding": "PCMU", "sample_rate": 8000, "channels": 1})

    def connected(self) -> dict[str, Any]:
        return {"event": "connected", "version": "1.0.0"}

    def start(
        self, ids: Mapping[str, str], parameters: Mapping[str, str], media_format: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {
            "event": "start",
            "start": {
                "user_id": ids["account"],
                "call_control_id": ids["call"],
                "call_session_id": ids["session"],
                "from": "+13122010094",
                "to": "+13122123456",
                "tags": [],
                "client_state": None,
                "custom_parameters": dict(parameters),
                "media_format": dict(media_format),
            },
        }

    media = TwilioDialect.media  # (Telnyx's media message is Twilio's, field for field)

    def dtmf(self, digit: str) -> dict[str, Any]:
        return {"event": "dtmf", "occurred_at": "2026-11-30T07:00:00Z", "dtmf": {"digit": digit}}

    def mark(self, name: str) -> dict[str, Any]:
        return {"event": "mark", "mark": {"name": name}}

    def stop(self, ids: Mapping[str, str]) -> dict[str, Any]:
        return {
            "event": "stop",
            "stop": {"user_id": ids["account"], "call_control_id": ids["call"]},
        }

    def stamp(self, message: dict[str, Any], sequence: int, stream_id: str) -> dict[str, Any]:
        if message["event"] == "connected":
            return message
        return {**message, "sequence_number": str(sequence), "stream_id": stream_id}

    def read(self, message: dict[str, Any], stream_id: str) -> Heard:
        # (Telnyx's commands carry no stream id: one socket is one stream.)
        if message.get("event") == "media" and len(_payload(message)) < 160:
            return None  # Telnyx takes 20 ms to 30 s a message: kept for the test to see
        return _read(message)


def _payload(message: dict[str, Any]) -> bytes:
    return base64.b64decode(message["media"]["payload"])


def _read(message: dict[str, Any]) -> Heard:
    event = message.get("event")
    if event == "media":
        return "media", _payload(message)
    if event == "mark":
        return "mark", message["mark"]["name"]
    if event == "clear":
        return "clear", None
    return None


class PlivoDialect:
    MULAW_8K = MappingProxyType({"encoding": "audio/x-mulaw", "sampleRate": 8000})
    returns_marks_on_clear = False  # playedStream only for audio that played

    def __init__(self) -> None:
        self._extra = ""

    def connected(self) -> dict[str, Any] | None:
        return None  # Plivo's first message is its start

    def cleared(self) -> dict[str, Any] | None:
        return {"event": "clearedAudio"}

    def start(
        self, ids: Mapping[str, str], parameters: Mapping[str, str], media_format: Mapping[str, Any]
    ) -> dict[str, Any]:
        # extraHeaders come back as one string, ``k=v`` pairs (as the reference shows)
        self._extra = ";".join(f"{name}={value}" for name, value in parameters.items())
        return {
            "event": "start",
            "start": {
                "callId": ids["call"],
                "streamId": ids["stream"],
                "accountId": ids["account"],
                "tracks": ["inbound"],
                "mediaFormat": dict(media_format),
            },
            "extra_headers": self._extra,
        }

    def media(self, ulaw: bytes, chunk: int) -> dict[str, Any]:
        return {
            "event": "media",
            "media": {
                "track": "inbound",
                "timestamp": str(1_705_312_200_000 + (chunk - 1) * 20),
                "chunk": chunk,
                "payload": base64.b64encode(ulaw).decode("ascii"),
            },
            "extra_headers": self._extra,
        }

    def dtmf(self, digit: str) -> dict[str, Any]:
        return {"event": "dtmf", "dtmf": {"digit": digit, "track": "inbound"}}

    def mark(self, name: str) -> dict[str, Any]:
        return {"event": "playedStream", "name": name}

    def stop(self, ids: Mapping[str, str]) -> dict[str, Any] | None:
        return None  # Plivo documents no stop: the socket closes

    def stamp(self, message: dict[str, Any], sequence: int, stream_id: str) -> dict[str, Any]:
        if message["event"] == "start":
            return {**message, "sequenceNumber": sequence}
        return {**message, "sequenceNumber": sequence, "streamId": stream_id}

    def read(self, message: dict[str, Any], stream_id: str) -> Heard:
        event = message.get("event")
        if message.get("streamId") != stream_id:
            return None
        if event == "playAudio":
            media = message["media"]
            if (media.get("contentType"), media.get("sampleRate")) != ("audio/x-mulaw", 8000):
                return None  # not what the stream was opened for: kept for the test to see
            return "media", base64.b64decode(media["payload"])
        if event == "checkpoint":
            return "mark", message["name"]
        if event == "clearAudio":
            return "clear", None
        return None

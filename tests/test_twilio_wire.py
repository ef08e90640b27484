"""Twilio Media Streams messages: Twilio's documented shapes parse, extra fields are
ignored, anything malformed is one ``BadTwilioMessage`` line; what we send."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from voice_membrane.server.protocol import BadMessage
from voice_membrane.server.twilio_wire import (
    BadTwilioMessage,
    Connected,
    Dtmf,
    Mark,
    Media,
    Start,
    Stop,
    TwilioMessage,
    clear_message,
    mark_message,
    media_message,
    parse_twilio_message,
)

SID = "MZ18ad3ab5a668481ce02b83e7395059f0"

# The examples of https://www.twilio.com/docs/voice/media-streams/websocket-messages
CONNECTED = {"event": "connected", "protocol": "Call", "version": "1.0.0"}
START: dict[str, Any] = {
    "event": "start",
    "sequenceNumber": "1",
    "start": {
        "accountSid": "AC" + "0" * 32,
        "streamSid": SID,
        "callSid": "CA" + "0" * 32,
        "tracks": ["inbound"],
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        "customParameters": {"pipeline": "local-voice", "FirstName": "Jane"},
    },
    "streamSid": SID,
}
MEDIA = {
    "event": "media",
    "sequenceNumber": "4",
    "media": {"track": "inbound", "chunk": "2", "timestamp": "5", "payload": "no+JhoaJjpzS"},
    "streamSid": SID,
}
DTMF = {
    "event": "dtmf",
    "streamSid": SID,
    "sequenceNumber": "5",
    "dtmf": {"track": "inbound_track", "digit": "1"},
}
MARK = {"event": "mark", "sequenceNumber": "4", "streamSid": SID, "mark": {"name": "my label"}}
STOP = {
    "event": "stop",
    "sequenceNumber": "5",
    "stop": {"accountSid": "AC" + "0" * 32, "callSid": "CA" + "0" * 32},
    "streamSid": SID,
}


def parse(message: Any) -> Any:
    return parse_twilio_message(json.dumps(message))


def test_twilio_documented_examples_parse() -> None:
    assert isinstance(parse(CONNECTED), Connected)
    start = parse(START)
    assert isinstance(start, Start)
    assert start.stream_sid == SID
    assert start.start.customParameters["pipeline"] == "local-voice"
    media = parse(MEDIA)
    assert isinstance(media, Media)
    assert media.media.payload == base64.b64decode("no+JhoaJjpzS")
    assert (media.media.chunk, media.media.timestamp, media.media.track) == (2, 5, "inbound")
    dtmf = parse(DTMF)
    assert isinstance(dtmf, Dtmf) and dtmf.dtmf.digit == "1"
    mark = parse(MARK)
    assert isinstance(mark, Mark) and mark.mark.name == "my label"
    stop = parse(STOP)
    assert isinstance(stop, Stop) and stop.stop is not None
    assert stop.stop.callSid == "CA" + "0" * 32


def test_fields_twilio_may_add_are_ignored() -> None:
    start = json.loads(json.dumps(START))
    start["newTopLevel"] = {"x": 1}
    start["start"]["someNewField"] = [1, 2]
    start["start"]["mediaFormat"]["bitDepth"] = 8
    assert isinstance(parse(start), Start)
    media = {**MEDIA, "media": {**MEDIA["media"], "extra": True}}
    assert isinstance(parse(media), Media)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"encoding": "audio/l16"}, "unsupported media format 'audio/l16' 8000 Hz 1 channel(s)"),
        ({"sampleRate": 16000}, "unsupported media format 'audio/x-mulaw' 16000 Hz"),
        ({"channels": 2}, "2 channel(s): only audio/x-mulaw 8000 Hz mono"),
    ],
)
def test_a_start_in_another_format_is_refused_in_one_line(
    change: dict[str, Any], expected: str
) -> None:
    start = json.loads(json.dumps(START))
    start["start"]["mediaFormat"].update(change)
    with pytest.raises(BadTwilioMessage) as caught:
        parse(start)
    assert str(caught.value).startswith("unsupported media format")
    assert expected in str(caught.value)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("not json", "not JSON"),
        (b'{"event":"media"}', "binary frame"),
        ("[1, 2]", "a message is a JSON object"),
        ('{"event": "hangup"}', "unknown event 'hangup'"),
        ('{"no": "event"}', "unknown event none"),
        (json.dumps({**MEDIA, "media": {"payload": "@@not base64@@"}}), "not base64"),
        (json.dumps({**MEDIA, "media": {"payload": 12}}), "base64 string"),
        (json.dumps({**MEDIA, "media": {"payload": "A" * 20000}}), "over 8000 bytes"),
        (json.dumps({"event": "media"}), "'media': Field required"),
        (json.dumps({**MARK, "mark": {}}), "'mark.name': Field required"),
        (json.dumps({**DTMF, "dtmf": {"digit": "xyz"}}), "'dtmf.digit'"),
        (json.dumps({"event": "start", "start": {"streamSid": SID}}), "mediaFormat"),
        ("1" * 5000, "not JSON"),
        ("[" * 100_000, "not JSON"),
    ],
)
def test_malformed_messages_are_one_line_errors(data: str | bytes, expected: str) -> None:
    with pytest.raises(BadTwilioMessage) as caught:
        parse_twilio_message(data)
    text = str(caught.value)
    assert expected in text
    assert "\n" not in text and len(text) < 400
    assert isinstance(caught.value, BadMessage)  # what the server already catches


def test_what_we_send_has_twilio_shapes() -> None:
    audio = bytes(range(160))
    assert json.loads(media_message(SID, audio)) == {
        "event": "media",
        "streamSid": SID,
        "media": {"payload": base64.b64encode(audio).decode()},
    }
    assert json.loads(mark_message(SID, "vm3")) == {
        "event": "mark",
        "streamSid": SID,
        "mark": {"name": "vm3"},
    }
    assert json.loads(clear_message(SID)) == {"event": "clear", "streamSid": SID}


@given(st.binary(max_size=8000))
def test_a_payload_we_send_decodes_to_the_same_bytes(audio: bytes) -> None:
    # Our media message, read back as Twilio would echo it on its inbound track.
    sent = json.loads(media_message(SID, audio))
    inbound = {**MEDIA, "media": {**MEDIA["media"], "payload": sent["media"]["payload"]}}
    message = parse(inbound)
    assert isinstance(message, Media)
    assert message.media.payload == audio


@given(st.text(max_size=40), st.binary(max_size=400))
def test_a_media_message_is_exactly_its_json(sid: str, audio: bytes) -> None:
    # (built from a cached head: any stream id, quotes and non-ASCII included)
    payload = base64.b64encode(audio).decode()
    assert media_message(sid, audio) == json.dumps(
        {"event": "media", "streamSid": sid, "media": {"payload": payload}}, separators=(",", ":")
    )


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_DOCUMENTED = [CONNECTED, START, MEDIA, DTMF, MARK, STOP]


def _paths(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    return found


@st.composite
def _one_field_replaced(draw: st.DrawFn) -> str:
    """A documented message with any one field (the event too) replaced by any JSON."""
    message = json.loads(json.dumps(draw(st.sampled_from(_DOCUMENTED))))
    *parents, last = draw(st.sampled_from(_paths(message)))
    target = message
    for key in parents:
        target = target[key]
    target[last] = draw(_JSON)
    return json.dumps(message)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(_one_field_replaced())
def test_hostile_messages_raise_nothing_but_the_one_error(text: str) -> None:
    try:
        parse_twilio_message(text)
    except BadTwilioMessage as exc:
        assert "\n" not in str(exc)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(_one_field_replaced())
def test_parsed_at_once_as_when_read_then_validated(text: str) -> None:
    # The text is validated by pydantic's own JSON parser first (cheaper); what it
    # accepts is exactly what json.loads then validation gives, and what it
    # refuses goes the step-by-step way (the same errors as before).
    try:
        expected: Any = TypeAdapter(TwilioMessage).validate_python(json.loads(text))
    except ValidationError:
        expected = BadTwilioMessage
    try:
        got: Any = parse_twilio_message(text)
    except BadTwilioMessage:
        got = BadTwilioMessage
    assert got == expected


@settings(max_examples=300)
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_hostile_frames_raise_nothing_but_the_one_error(data: str | bytes) -> None:
    try:
        parse_twilio_message(data)
    except BadTwilioMessage as exc:
        assert "\n" not in str(exc)

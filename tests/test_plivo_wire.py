"""Plivo's Audio Streams, sans-I/O: its messages (the examples of Plivo's
protocol reference) parsed into the common events, malformed and unknown ones
refused in one line, what we send built; the V3 signature; the answer XML."""

from __future__ import annotations

import base64
import json
from typing import Any
from xml.etree import ElementTree

import pytest
from websockets.datastructures import Headers
from websockets.http11 import Request

from voice_membrane.server.carrier_wire import (
    BadCarrierMessage,
    CallAudio,
    CallStart,
    HungUp,
    Ignored,
    KeyPress,
    Played,
    UnsupportedFormat,
)
from voice_membrane.server.plivo_route import answer_route, plivo_tokens, stream_xml
from voice_membrane.server.plivo_signature import signature_matches
from voice_membrane.server.plivo_wire import PLIVO, extra_headers
from voice_membrane.server.twilio_call_token import CALL_TOKEN_PARAMETER
from voice_membrane.testing.fake_plivo import plivo_signature

STREAM = "87654321-4321-4321-4321-cba987654321"
CALL = "12345678-1234-1234-1234-123456789abc"
TOKEN = "plivo-auth-token-for-the-tests"
# https://www.plivo.com/docs/voice-agents/audio-streaming/concepts/audio-streaming-reference
START: dict[str, Any] = {
    "event": "start",
    "sequenceNumber": 1,
    "start": {
        "callId": CALL,
        "streamId": STREAM,
        "accountId": "MAXXXXXXXXXXXXXXXXXX",
        "tracks": ["inbound"],
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000},
    },
    "extra_headers": "userId=12345;sessionId=abcxyz",
}
AUDIO = bytes(range(160))


def parse(message: dict[str, Any]) -> Any:
    return PLIVO.parse(json.dumps(message))


def test_the_documented_messages_are_the_common_events() -> None:
    assert parse(START) == CallStart(STREAM, CALL, {"userId": "12345", "sessionId": "abcxyz"})
    media = {
        "event": "media",
        "sequenceNumber": 42,
        "streamId": STREAM,
        "media": {
            "track": "inbound",
            "timestamp": "1705312200000",
            "chunk": 41,
            "payload": base64.b64encode(AUDIO).decode(),
        },
        "extra_headers": "userId=12345",
    }
    assert parse(media) == CallAudio(AUDIO)
    assert parse({"event": "dtmf", "streamId": STREAM, "dtmf": {"digit": "5"}}) == KeyPress("5")
    played = {"event": "playedStream", "streamId": STREAM, "name": "vm2"}
    assert parse(played) == Played("vm2")
    assert parse({"event": "clearedAudio", "sequenceNumber": 50, "streamId": STREAM}) == Ignored(
        "clearedAudio"
    )
    assert parse({"event": "stop", "streamId": STREAM}) == HungUp()


def test_the_call_token_comes_back_in_extra_headers() -> None:
    start = {**START, "extra_headers": "pipeline=long,calltoken=1796000000xab12"}
    parsed = parse(start)
    assert parsed.parameters == {"pipeline": "long", CALL_TOKEN_PARAMETER: "1796000000xab12"}
    # anything but letters and digits is left out
    assert extra_headers("a=1;b=x-y; c = 2 ;=3;d") == {"a": "1"}


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x00", "binary frame"),
        ("{", "not JSON"),
        ("[]", "a message is a JSON object"),
        (json.dumps({"event": "connected"}), "unknown event 'connected'"),
        (json.dumps({"event": "media", "media": {"payload": "%%%"}}), "not base64"),
        (json.dumps({"event": "playedStream"}), "playedStream: 'name'"),
    ],
)
def test_a_bad_message_is_refused_in_one_line(data: str | bytes, why: str) -> None:
    with pytest.raises(BadCarrierMessage) as refused:
        PLIVO.parse(data)
    assert why in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(("encoding", "rate"), [("audio/x-l16", 8000), ("audio/x-l16", 16000)])
def test_only_mulaw_8k_is_taken(encoding: str, rate: int) -> None:
    start = json.loads(json.dumps(START))
    start["start"]["mediaFormat"] = {"encoding": encoding, "sampleRate": rate}
    with pytest.raises(UnsupportedFormat, match=f"unsupported media format '{encoding}' {rate}"):
        parse(start)


def test_what_we_send_is_plivo_s_shape() -> None:
    sent = json.loads(PLIVO.media(STREAM, AUDIO))
    assert sent == {
        "event": "playAudio",
        "media": {
            "contentType": "audio/x-mulaw",
            "sampleRate": 8000,
            "payload": base64.b64encode(AUDIO).decode(),
        },
        "streamId": STREAM,
    }
    checkpoint = {"event": "checkpoint", "streamId": STREAM, "name": "vm1"}
    assert json.loads(PLIVO.mark(STREAM, "vm1")) == checkpoint
    assert json.loads(PLIVO.clear(STREAM)) == {"event": "clearAudio", "streamId": STREAM}


def test_the_v3_signature() -> None:
    url = "https://voice.example.com/v1/plivo/answer"
    query = {"To": "14155550199", "CallUUID": CALL, "From": "14155550100"}
    full = url + "?" + "&".join(f"{k}={v}" for k, v in query.items())  # (unsorted, as sent)
    signature = plivo_signature(TOKEN, url, query, "12345")
    assert signature_matches(TOKEN, full, "12345", signature)
    assert signature_matches(TOKEN, full, "12345", f"AAAA,{signature}")  # one of several
    assert not signature_matches(TOKEN, full, "54321", signature)  # another nonce
    assert not signature_matches("another token", full, "12345", signature)
    assert not signature_matches(TOKEN, full.replace(CALL, "other"), "12345", signature)
    assert not signature_matches(TOKEN, full, None, signature)
    assert not signature_matches(TOKEN, full, "12345", None)


def test_the_answer_xml_streams_the_call_with_its_token() -> None:
    tokens = plivo_tokens(TOKEN)
    url = "wss://voice.example.com/v1/plivo"
    query = {"CallUUID": CALL, "pipeline": "long"}
    path = "/v1/plivo/answer?CallUUID=" + CALL + "&pipeline=long"
    headers = Headers(
        {
            "X-Plivo-Signature-V3": plivo_signature(
                TOKEN, "https://voice.example.com/v1/plivo/answer", query, "7"
            ),
            "X-Plivo-Signature-V3-Nonce": "7",
        }
    )
    answer = answer_route(Request(path, headers), url, TOKEN, tokens, 1_796_000_000.0)
    assert not isinstance(answer, str) and answer.status_code == 200
    stream = ElementTree.fromstring(answer.body).find("./Stream")
    assert stream is not None and stream.text == url
    assert (stream.get("bidirectional"), stream.get("keepCallAlive")) == ("true", "true")
    assert stream.get("contentType") == "audio/x-mulaw;rate=8000"
    extra = extra_headers(stream.get("extraHeaders", ""))
    assert extra["pipeline"] == "long"
    assert tokens.redeem(CALL, extra["calltoken"], 1_796_000_000.0) is None
    unsigned = Request(path, Headers())
    assert answer_route(unsigned, url, TOKEN, tokens, 1_796_000_000.0) == "no X-Plivo-Signature-V3"
    with pytest.raises(ValueError, match="letters and digits"):
        stream_xml(url, "local-voice")


def test_a_configuration_that_could_check_no_call_is_one_line() -> None:
    from voice_membrane.pipeline.config import ConfigError
    from voice_membrane.server.plivo_route import plivo_check

    with pytest.raises(ConfigError, match="PLIVO_AUTH_TOKEN\\) is empty"):
        plivo_check("", None)
    with pytest.raises(ConfigError, match="--plivo-url without PLIVO_AUTH_TOKEN"):
        plivo_check(None, "wss://voice.example.com/v1/plivo")
    with pytest.raises(ConfigError, match="--plivo-url: the stream URL must start with wss://"):
        plivo_check(TOKEN, "https://voice.example.com/v1/plivo")
    plivo_check(TOKEN, "wss://voice.example.com/v1/plivo")

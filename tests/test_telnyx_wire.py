"""Telnyx's media stream, sans-I/O: its messages parsed into the common events
(the examples of Telnyx's AsyncAPI page), malformed and unknown ones refused
in one line, what we send built; the webhook's Ed25519 signature; the TeXML."""

from __future__ import annotations

import base64
import json
import time
from typing import Any
from xml.etree import ElementTree

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from websockets.datastructures import Headers
from websockets.http11 import Request

from voice_membrane.server.carrier_wire import (
    BadCarrierMessage,
    CallAudio,
    CallStart,
    CarrierNotice,
    HungUp,
    Ignored,
    KeyPress,
    Played,
    UnsupportedFormat,
)
from voice_membrane.server.telnyx_route import stream_texml, texml_route
from voice_membrane.server.telnyx_signature import TelnyxSignatures
from voice_membrane.server.telnyx_wire import TELNYX
from voice_membrane.server.twilio_call_token import CALL_TOKEN_PARAMETER, CallTokens
from voice_membrane.testing.fake_telnyx import public_key_of, telnyx_headers

STREAM = "32DE0DEA-53CB-4B21-89A4-9E1819C043BC"
CALL = "v2:T02llQxIyaRkhfRKxgAP8nY511EhFLizdvdUKJiSw8d6A9BborherQ"
# https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket
START: dict[str, Any] = {
    "event": "start",
    "sequence_number": "1",
    "stream_id": STREAM,
    "start": {
        "user_id": "3E6F995F-85F7-4705-9741-53B116D28237",
        "call_control_id": CALL,
        "call_session_id": "ff55a038-6f5d-11ef-9692-02420aeffb1f",
        "from": "+13122010094",
        "to": "+13122123456",
        "tags": ["TAG1", "TAG2"],
        "client_state": "aGF2ZSBhIG5pY2UgZGF5ID1d",
        "custom_parameters": {"customer_id": "customer_123"},
        "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1},
    },
}
AUDIO = bytes(range(160))


def parse(message: dict[str, Any]) -> Any:
    return TELNYX.parse(json.dumps(message))


def test_the_documented_messages_are_the_common_events() -> None:
    assert parse({"event": "connected", "version": "1.0.0"}) == Ignored("connected")
    assert parse(START) == CallStart(STREAM, CALL, {"customer_id": "customer_123"})
    media = {
        "event": "media",
        "sequence_number": "4",
        "media": {
            "track": "inbound",
            "chunk": "2",
            "timestamp": "5",
            "payload": base64.b64encode(AUDIO).decode(),
        },
        "stream_id": STREAM,
    }
    assert parse(media) == CallAudio(AUDIO)
    # both_tracks: the outbound track is our own audio, not the caller's
    media["media"]["track"] = "outbound"
    assert isinstance(parse(media), Ignored)
    dtmf = {"event": "dtmf", "stream_id": STREAM, "sequence_number": "5", "dtmf": {"digit": "1"}}
    assert parse(dtmf) == KeyPress("1")
    assert parse({"event": "mark", "stream_id": STREAM, "mark": {"name": "vm3"}}) == Played("vm3")
    stop = {"event": "stop", "stop": {"user_id": "u", "call_control_id": CALL}, "stream_id": STREAM}
    assert parse(stop) == HungUp()
    error = {
        "event": "error",
        "payload": {"code": 100003, "title": "malformed_frame", "detail": "Unable to parse"},
        "stream_id": STREAM,
    }
    assert parse(error) == CarrierNotice("100003 malformed_frame Unable to parse")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x00", "binary frame"),
        ("{", "not JSON"),
        ("[1]", "a message is a JSON object"),
        (json.dumps({"event": "hello"}), "unknown event 'hello'"),
        (json.dumps({"event": "media", "media": {"payload": "not base64!"}}), "not base64"),
        (json.dumps({"event": "dtmf", "dtmf": {"digit": "12"}}), "dtmf: 'dtmf.digit'"),
        (json.dumps({**START, "stream_id": ""}), "start: 'stream_id'"),
    ],
)
def test_a_bad_message_is_refused_in_one_line(data: str | bytes, why: str) -> None:
    with pytest.raises(BadCarrierMessage) as refused:
        TELNYX.parse(data)
    assert why in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(("encoding", "rate"), [("PCMA", 8000), ("L16", 16000), ("PCMU", 16000)])
def test_only_pcmu_8k_is_taken(encoding: str, rate: int) -> None:
    start = json.loads(json.dumps(START))
    start["start"]["media_format"] = {"encoding": encoding, "sample_rate": rate, "channels": 1}
    with pytest.raises(UnsupportedFormat, match=f"unsupported media format '{encoding}' {rate}"):
        parse(start)


def test_what_we_send_is_telnyx_s_shape() -> None:
    sent = json.loads(TELNYX.media(STREAM, AUDIO))
    assert sent == {"event": "media", "media": {"payload": base64.b64encode(AUDIO).decode()}}
    # Telnyx takes 20 ms to 30 s a message: a shorter tail is padded with silence
    tail = base64.b64decode(json.loads(TELNYX.media(STREAM, b"\x01\x02"))["media"]["payload"])
    assert tail == b"\x01\x02" + b"\xff" * 158
    assert json.loads(TELNYX.mark(STREAM, "vm1")) == {"event": "mark", "mark": {"name": "vm1"}}
    assert json.loads(TELNYX.clear(STREAM)) == {"event": "clear"}


def test_a_webhook_signature_is_checked_and_taken_once() -> None:
    key = Ed25519PrivateKey.generate()
    signatures = TelnyxSignatures(public_key_of(key))
    now = time.time()
    good = telnyx_headers(key, b"", now)
    forged = telnyx_headers(Ed25519PrivateKey.generate(), b"", now)
    stale = telnyx_headers(key, b"", now - 600)

    def refusal(headers: dict[str, str]) -> str | None:
        return signatures.refusal(
            headers.get("telnyx-signature-ed25519"), headers.get("telnyx-timestamp"), b"", now
        )

    assert refusal(forged) == "telnyx-signature-ed25519 does not match"
    assert refusal({}) is not None and "no telnyx-signature-ed25519" in str(refusal({}))
    assert refusal(stale) is not None and "more than 300 s" in str(refusal(stale))
    assert refusal(good) is None
    assert refusal(good) == "this telnyx-signature-ed25519 was taken already"  # a replay
    with pytest.raises(ValueError, match="not a base64 Ed25519 public key"):
        TelnyxSignatures("not a key")


def test_the_texml_streams_the_call_with_its_token() -> None:
    key = Ed25519PrivateKey.generate()
    signatures = TelnyxSignatures(public_key_of(key))
    tokens = CallTokens("a secret of the tests", call_id="call_control_id")
    url = "wss://voice.example.com/v1/telnyx"
    path = f"/v1/telnyx/texml?CallSid={CALL}&pipeline=long"
    now = time.time()
    signed = Request(path, Headers(telnyx_headers(key, b"", now)))
    answer = texml_route(signed, url, signatures, tokens, now)
    assert not isinstance(answer, str) and answer.status_code == 200
    stream = ElementTree.fromstring(answer.body).find("./Start/Stream")
    assert stream is not None and stream.get("url") == url
    assert (stream.get("bidirectionalMode"), stream.get("bidirectionalCodec")) == ("rtp", "PCMU")
    parameters = {p.get("name"): p.get("value") for p in stream.findall("Parameter")}
    assert parameters["pipeline"] == "long"
    assert tokens.redeem(CALL, parameters[CALL_TOKEN_PARAMETER], now) is None
    unsigned = Request(path, Headers())
    assert isinstance(texml_route(unsigned, url, signatures, tokens, now), str)
    with pytest.raises(ValueError, match="wss://"):
        stream_texml("https://voice.example.com/v1/telnyx")

"""The phone route's gate: the signature of the public URL, local calls only
without a Twilio auth token, never a browser."""

from __future__ import annotations

from websockets.datastructures import Headers
from websockets.http11 import Request

from voice_membrane.server.twilio_gate import twilio_refusal
from voice_membrane.testing.fake_twilio import twilio_signature

TOKEN = "twilio-auth-token-0123456789"
PUBLIC = "wss://voice.example.com/v1/twilio"


def request(**headers: str) -> Request:
    return Request("/v1/twilio", Headers({"Host": "127.0.0.1:8765", **headers}))


def test_a_signed_upgrade_passes_and_anything_else_is_refused() -> None:
    good = twilio_signature(TOKEN, PUBLIC)
    assert (
        twilio_refusal(
            request(**{"X-Twilio-Signature": good}),
            auth_token=TOKEN,
            public_url=PUBLIC,
            local=False,
        )
        is None
    )
    for headers, reason in [
        ({}, "no X-Twilio-Signature"),
        ({"X-Twilio-Signature": twilio_signature("wrong", PUBLIC)}, "does not match"),
        ({"X-Twilio-Signature": twilio_signature(TOKEN, PUBLIC + "x")}, "does not match"),
        ({"X-Twilio-Signature": good, "Origin": "https://evil.example"}, "not for browsers"),
    ]:
        refusal = twilio_refusal(
            request(**headers), auth_token=TOKEN, public_url=PUBLIC, local=True
        )
        assert refusal is not None and reason in refusal


def test_without_a_public_url_the_host_header_names_it() -> None:
    url = "wss://voice.example.com/v1/twilio"
    signed = Request(
        "/v1/twilio",
        Headers({"Host": "voice.example.com", "X-Twilio-Signature": twilio_signature(TOKEN, url)}),
    )
    assert twilio_refusal(signed, auth_token=TOKEN, public_url=None, local=False) is None


def test_without_a_token_only_local_calls_pass() -> None:
    assert twilio_refusal(request(), auth_token=None, public_url=None, local=True) is None
    refusal = twilio_refusal(request(), auth_token=None, public_url=None, local=False)
    assert refusal == "no Twilio auth token is configured: phone calls are refused"


def test_a_repeated_signature_is_refused() -> None:
    headers = Headers()
    headers["X-Twilio-Signature"] = twilio_signature(TOKEN, PUBLIC)
    headers["X-Twilio-Signature"] = "AAAA"
    refusal = twilio_refusal(
        Request("/v1/twilio", headers), auth_token=TOKEN, public_url=PUBLIC, local=True
    )
    assert refusal == "a header is repeated"

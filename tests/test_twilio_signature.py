"""X-Twilio-Signature: known answers computed with hmac, Twilio's port quirk, the
URL behind a proxy, and (where the ``twilio`` package is installed) agreement
with its own RequestValidator."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voice_membrane.server.twilio_signature import (
    compute_signature,
    signature_matches,
    signed_url,
    url_variants,
)

TOKEN = "12345"
URL = "wss://voice.example.com/v1/twilio"


def by_hand(token: str, data: str) -> str:
    return base64.b64encode(hmac.new(token.encode(), data.encode(), hashlib.sha1).digest()).decode()


def test_known_answers() -> None:
    # A WebSocket upgrade is a GET: the URL alone is signed.
    assert compute_signature(TOKEN, URL) == by_hand(TOKEN, URL)
    assert (
        compute_signature(TOKEN, URL) == "LlXgETQBie/lEXbglT20RkzJTMk="
    )  # openssl dgst -sha1 -hmac
    # A webhook POST: the parameters sorted by name, each name then its value.
    params = {"To": "+18005551212", "CallSid": "CA1234567890ABCDE", "Digits": "1234"}
    expected = by_hand(TOKEN, URL + "CallSidCA1234567890ABCDE" + "Digits1234" + "To+18005551212")
    assert compute_signature(TOKEN, URL, params) == expected
    # A repeated parameter: its values sorted too.
    assert compute_signature(TOKEN, URL, {"a": ["2", "1"]}) == by_hand(TOKEN, URL + "a1a2")


def test_a_matching_signature_is_accepted_and_anything_else_refused() -> None:
    good = compute_signature(TOKEN, URL)
    assert signature_matches(TOKEN, URL, good)
    assert signature_matches(TOKEN, URL, f" {good} ")  # header whitespace
    assert not signature_matches(TOKEN, URL, None)
    assert not signature_matches(TOKEN, URL, "")
    assert not signature_matches("another token", URL, good)
    assert not signature_matches(TOKEN, URL + "x", good)
    assert not signature_matches(TOKEN, URL, good[:-2])
    assert not signature_matches("", URL, compute_signature("", URL))


def test_signed_with_or_without_the_default_port() -> None:
    # Twilio may sign the URL with the port it connected to, or without it.
    with_port = "wss://voice.example.com:443/v1/twilio"
    assert signature_matches(TOKEN, URL, compute_signature(TOKEN, with_port))
    assert signature_matches(TOKEN, with_port, compute_signature(TOKEN, URL))
    assert url_variants("wss://h:8443/p?x=1") == ["wss://h:8443/p?x=1", "wss://h/p?x=1"]
    assert url_variants("https://h/p") == ["https://h/p", "https://h:443/p"]
    assert url_variants("wss://[::1]/p") == ["wss://[::1]/p", "wss://[::1]:443/p"]
    assert url_variants("wss://h:bad/p") == ["wss://h:bad/p"]


def test_the_signed_url_is_the_public_one_when_configured() -> None:
    assert signed_url(None, "/v1/twilio", "voice.example.com") == URL
    assert signed_url(URL, "/v1/twilio", "127.0.0.1:8765") == URL
    # Behind a proxy that moved the path: the configured URL is what Twilio called.
    public = "wss://public.example.com/calls/v1/twilio"
    assert signed_url(public, "/v1/twilio", "internal:8765") == public
    assert signed_url(public, "/v1/twilio?a=1", "internal") == public + "?a=1"


def test_agrees_with_twilios_request_validator() -> None:
    twilio = pytest.importorskip("twilio.request_validator")
    validator = twilio.RequestValidator(TOKEN)
    for url in [
        URL,
        "https://voice.example.com/v1/twilio",
        "https://voice.example.com:443/v1/twilio",
        "wss://voice.example.com:443/v1/twilio?pipeline=x",
        "https://mycompany.com/myapp.php?foo=1&bar=2",
    ]:
        for params in [{}, {"CallSid": "CA1", "Digits": "1234", "From": "+1"}]:
            ours = compute_signature(TOKEN, url, params)
            assert ours == validator.compute_signature(url, params)
            assert validator.validate(url, params, ours)
            assert signature_matches(TOKEN, url, ours, params)
            # Signed without the port, checked with it (and the reverse): both accept.
            bare = url.replace(":443", "")
            theirs = validator.compute_signature(bare, params)
            assert validator.validate(url, params, theirs)
            assert signature_matches(TOKEN, url, theirs, params)


@given(token=st.text(min_size=1, max_size=40), path=st.text(max_size=40))
def test_only_the_right_token_matches(token: str, path: str) -> None:
    url = URL + "/" + path
    signature = compute_signature(token, url)
    assert signature_matches(token, url, signature)
    assert not signature_matches(token + "x", url, signature)

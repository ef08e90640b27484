"""Secrets are masked by value, in URLs and after credential headers; a user's
value is quoted redacted and cut."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.providers.base import ProviderError
from voice_membrane.redact import KEY_VARIABLES, MASK, forget_all, quote, redact, remember

# Planted keys in each vendor's shape.
PLANTED = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-PLANTEDanthropicKEY0123456789",
    "OPENAI_API_KEY": "sk-proj-PLANTEDopenaiKEY0123456789",
    "GEMINI_API_KEY": "AIzaSyPLANTEDgeminiKEY0123456789",
    "GOOGLE_API_KEY": "AIzaSyPLANTEDgoogleKEY0123456789",
    "ELEVENLABS_API_KEY": "sk_PLANTEDelevenlabsKEY0123456789",
    "XI_API_KEY": "PLANTEDxiKEY0123456789abcdef",
}


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    forget_all()
    yield
    forget_all()


@pytest.mark.parametrize("variable", sorted(PLANTED))
def test_every_vendor_key_is_masked_in_every_form(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    key = PLANTED[variable]
    monkeypatch.setenv(variable, key + "\r\n")  # a key pasted with its line end
    header = b"Bearer " + key.encode() + b"\r"
    texts = [
        f"invalid key {key}",
        f"Illegal header value {header!r}",
        f"{{'x-api-key': '{key}\\r\\n'}}",
        f"xi-api-key: {key}",
    ]
    for text in texts:
        shown = redact(text)
        assert key not in shown and MASK in shown, shown


def test_a_remembered_key_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "my-own-proxy-key-0123456789"
    assert redact(f"bad key {key}") == f"bad key {key}"
    remember(key)
    assert redact(f"bad key {key}") == f"bad key {MASK}"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("failed (http://user:s3cret@proxy:8080/v1)", "failed (http://***@proxy:8080/v1)"),
        ("at https://host/v1?key=s3cret&alt=sse", "at https://host/v1?key=***&alt=sse"),
        ("at https://host/?api_key=s3cret)", "at https://host/?api_key=***)"),
        ("at https://host/?access_token=s3cret#x", "at https://host/?access_token=***#x"),
        ("Authorization: Bearer s3cret-token", "Authorization: Bearer ***"),
        ("headers {'x-goog-api-key': 's3cret'}", "headers {'x-goog-api-key': '***'}"),
        # not secrets: left alone
        ("https://host/v1/messages?alt=sse", "https://host/v1/messages?alt=sse"),
        ("auth: missing authorization header", "auth: missing authorization header"),
        ("user@example.com wrote", "user@example.com wrote"),
    ],
)
def test_url_and_header_credentials_are_masked(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_short_values_are_not_masked_by_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "abc")
    assert redact("abc def") == "abc def"


def test_quote_cuts_a_huge_value() -> None:
    shown = quote("x" * 1_000_000)
    assert shown.startswith("'xxx") and len(shown) < 120
    assert "(1,000,002 characters)" in shown
    assert quote("short") == "'short'"
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert quote(deep) == "a value nested too deeply to show"


def test_a_provider_error_never_carries_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    key = PLANTED["OPENAI_API_KEY"]
    monkeypatch.setenv("OPENAI_API_KEY", key)
    error = ProviderError("openai", "connection", f"LocalProtocolError: b'Bearer {key}\\r'")
    error = error.at(f"http://u:{key}@127.0.0.1:9/v1?key={key}")
    assert key not in str(error) and key not in error.detail
    assert "(http://***@127.0.0.1:9/v1?key=***)" in str(error)


KEYS = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="*"),
    min_size=8,
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(key=KEYS, before=st.text(max_size=40), after=st.text(max_size=40))
def test_a_known_key_never_survives(key: str, before: str, after: str) -> None:
    forget_all()
    remember(key)
    for text in (before + key + after, f"{before}{key!r}{after}", f"{key.encode()!r}"):
        assert key not in redact(text)

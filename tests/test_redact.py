"""Secrets are masked by value, in URLs and after credential headers; a user's
value is quoted redacted and cut."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vendors import VENDORS, Vendor

from voice_membrane.cli.run import _write_metrics
from voice_membrane.infra.redact import MASK, forget_all, quote, redact, remember
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.membrane.reply import ReplyError, Retrying
from voice_membrane.pipeline.event_log import JsonlEventLog, OutputFileError
from voice_membrane.pipeline.metrics import TurnMetrics
from voice_membrane.testing.script import ScriptedReply
from voice_membrane.testing.script import text as text_block
from voice_membrane.vendors.errors import ProviderError
from voice_membrane.vendors.retry import NO_RETRY
from voice_membrane.vocab.messages import Message, ModelConfig, Request

# Planted keys in each vendor's shape.
PLANTED = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-PLANTEDanthropicKEY0123456789",
    "OPENAI_API_KEY": "sk-proj-PLANTEDopenaiKEY0123456789",
    "GEMINI_API_KEY": "AIzaSyPLANTEDgeminiKEY0123456789",
    "GOOGLE_API_KEY": "AIzaSyPLANTEDgoogleKEY0123456789",
    "ELEVENLABS_API_KEY": "sk_PLANTEDelevenlabsKEY0123456789",
    "XI_API_KEY": "PLANTEDxiKEY0123456789abcdef",
}

PLANTED_BY_VENDOR = {
    "anthropic": PLANTED["ANTHROPIC_API_KEY"],
    "openai": PLANTED["OPENAI_API_KEY"],
    "gemini": PLANTED["GEMINI_API_KEY"],
}


# No vendor key in the environment: the only keys a test masks are its own.
pytestmark = pytest.mark.usefixtures("no_key_variables")


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


# ------------------------------------------------ keys a provider was given, by value


def reply_errors(vendor: Vendor, key: str, reply: ScriptedReply) -> list[str]:
    """Every error text a Membrane over ``vendor``'s adapter (given ``key``) reports."""

    async def run() -> list[str]:
        texts: list[str] = []
        with vendor.server(reply) as server:
            provider = vendor.adapter(api_key=key, base_url=server.base_url)
            membrane = Membrane(provider, "native", retry=NO_RETRY)
            request = Request(
                messages=[Message(participant="User", content="hi")],
                config=ModelConfig(model=vendor.model, max_tokens=10),
            )
            async for item in membrane.stream(request):
                if isinstance(item, ReplyError | Retrying):
                    texts.append(item.message if isinstance(item, ReplyError) else item.error)
        return texts

    return anyio.run(run)


@pytest.mark.parametrize("vendor", VENDORS, ids=[v.name for v in VENDORS])
def test_a_key_given_to_an_adapter_is_masked_when_the_server_echoes_it(vendor: Vendor) -> None:
    key = PLANTED_BY_VENDOR[vendor.name]
    errors = reply_errors(vendor, key, ScriptedReply.http_error(401, message=f"bad key {key}"))
    assert errors and all(key not in e and "bad key ***" in e for e in errors), errors


@pytest.mark.parametrize("vendor", VENDORS, ids=[v.name for v in VENDORS])
@pytest.mark.parametrize(
    ("suffix", "said"),
    [("\r", "starts or ends with a space or line break"), ("é", "contains a non-ASCII character")],
)
def test_a_key_that_cannot_be_sent_is_one_error_naming_no_key(
    vendor: Vendor, suffix: str, said: str
) -> None:
    """An adapter used directly: a key no HTTP header can carry ends the reply with
    one ``auth`` error saying why (not httpx's error quoting the key, not a raw
    encoding error, not retried)."""
    key = PLANTED_BY_VENDOR[vendor.name]
    errors = reply_errors(vendor, key + suffix, ScriptedReply.of(text_block("hi")))
    assert len(errors) == 1 and f"auth: the API key {said}" in errors[0], errors
    assert key not in errors[0]


# ------------------------------------------------------- the output files, second net


def test_the_events_log_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = PLANTED["OPENAI_API_KEY"]
    monkeypatch.setenv("OPENAI_API_KEY", key)
    log = JsonlEventLog(tmp_path / "e.jsonl")
    log({"event": "chunk", "text": f"the tool said {key}"})
    log.close()
    (line,) = (tmp_path / "e.jsonl").read_text().splitlines()
    assert key not in line and json.loads(line)["text"] == "the tool said ***"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_full_events_log_does_not_stop_the_turn() -> None:
    log = JsonlEventLog("/dev/full")
    for n in range(2000):  # past the file's buffer: writes fail quietly …
        log({"event": "chunk", "text": f"piece {n} " * 10})
    with pytest.raises(OutputFileError, match=r"^cannot write /dev/full: No space left"):
        log.close()  # … and close says so, once


def test_the_metrics_file_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = PLANTED["GEMINI_API_KEY"]
    monkeypatch.setenv("GEMINI_API_KEY", key)
    metrics = TurnMetrics()
    metrics.retries.append(f"gemini: connection: rejected {key} (waited 0.5 s)")
    report = metrics.report(llm="gemini:x", tts="espeak", sink="null")
    _write_metrics(tmp_path / "m.json", [report], True)
    written = json.loads((tmp_path / "m.json").read_text())
    assert written["retries"] == ["gemini: connection: rejected *** (waited 0.5 s)"]

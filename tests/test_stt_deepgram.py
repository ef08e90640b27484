"""The Deepgram engine over the real deepgram-sdk against the fake service:
partials then finals with word times, Finalize ends the stream, each fault is
the right SttError with the finals kept, one retry before the first transcript
and never after, and no key in any error."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

import anyio
import pytest

from voice_membrane.stt.base import SttError
from voice_membrane.stt.deepgram import CLOSE_TIMEOUT_S, DeepgramStt
from voice_membrane.stt.retrying import RetryingStt
from voice_membrane.testing.fake_deepgram import FakeDeepgram
from voice_membrane.testing.stt_drive import Heard, drive, speech
from voice_membrane.testing.transcript_script import TranscriptScript
from voice_membrane.vendors.retry import RetryPolicy

KEY = "dg-secret-key-0123456789abcdef"
SAID = TranscriptScript.of("Book a table for two, please.", finals_after=(1,))
FAST_RETRY = RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.05)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeDeepgram]:
    with FakeDeepgram(api_key=KEY) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeDeepgram) -> FakeDeepgram:
    server.reset()
    return server


def run(fake: FakeDeepgram, seconds: float = 3.5, retry: bool = False, **options: object) -> Heard:
    async def main() -> Heard:
        engine = DeepgramStt("nova-3", api_key=KEY, base_url=fake.ws_url, **options)  # type: ignore[arg-type]
        await engine.start()
        used = RetryingStt(engine, FAST_RETRY) if retry else engine
        with anyio.fail_after(20):
            return await drive(used, speech(seconds))

    return anyio.run(main)


def test_partials_then_finals_with_word_times(fake: FakeDeepgram) -> None:
    fake.add(SAID)
    heard = run(fake)
    assert heard.error is None
    assert heard.partials and heard.partials[0].text == "Book"
    assert [f.text for f in heard.finals] == ["Book a", "table for two, please."]
    words = [w for f in heard.finals for w in f.words]
    assert [w.text for w in words] == SAID.text.split()
    assert [(w.start_s, w.end_s) for w in words] == [(w.start_s, w.end_s) for w in SAID.words]
    conn = fake.connections[0]
    assert conn.query["encoding"] == "linear16" and conn.query["sample_rate"] == "16000"
    assert conn.query["interim_results"] == "true" and conn.query["model"] == "nova-3"
    assert conn.samples == 3.5 * 16000
    assert conn.controls[0] == {"type": "Finalize"} and conn.controls[-1] == {"type": "CloseStream"}


def test_finalize_settles_only_what_was_heard(fake: FakeDeepgram) -> None:
    fake.add(SAID)
    heard = run(fake, seconds=1.2)  # "Book a" ended by 1.1 s; "table" not yet
    assert heard.error is None and heard.text == "Book a"
    results = [m for m in fake.connections[0].sent if m["type"] == "Results"]
    assert results[-1]["from_finalize"] is True


def test_silence_ends_with_no_final_and_no_error(fake: FakeDeepgram) -> None:
    heard = run(fake, seconds=1.0)  # an empty script: nothing heard
    assert heard.error is None and heard.transcripts == []


def test_keywords_go_as_key_terms_for_nova_3(fake: FakeDeepgram) -> None:
    fake.add(SAID)
    run(fake, keywords=("Voice Membrane",), endpointing_ms=None, utterance_end_ms=1000)
    query = fake.connections[0].query
    assert query["keyterm"] == "Voice Membrane" and query["endpointing"] == "false"
    assert query["utterance_end_ms"] == "1000"


@pytest.mark.parametrize(
    ("script", "retryable", "words"),
    [
        (TranscriptScript.http_error(429, retry_after=7), True, "rate_limit (HTTP 429)"),
        (TranscriptScript.http_error(503), True, "server (HTTP 503)"),
        (TranscriptScript.http_error(403), False, "auth (HTTP 403)"),
        (SAID.with_fault("drop", after_messages=3), True, "connection"),
        (SAID.with_fault("malformed", after_messages=3), False, "malformed"),
    ],
)
def test_each_fault_is_the_right_error_and_keeps_the_finals(
    fake: FakeDeepgram, script: TranscriptScript, retryable: bool, words: str
) -> None:
    fake.add(script)
    heard = run(fake)
    assert heard.error is not None and words in str(heard.error)
    assert heard.error.retryable is retryable
    if script.fault is not None and script.fault.kind == "http_error":
        assert heard.error.retry_after_s == script.fault.retry_after
    else:  # three messages out first: two partials and the first final
        assert [f.text for f in heard.finals] == ["Book a"]
    assert KEY not in str(heard.error) and "Authorization" not in str(heard.error)


def test_a_wrong_key_is_refused_and_not_shown(fake: FakeDeepgram) -> None:
    async def main() -> Heard:
        engine = DeepgramStt("nova-3", api_key="wrong-" + KEY, base_url=fake.ws_url)
        await engine.start()
        return await drive(RetryingStt(engine, FAST_RETRY), speech(0.5))

    heard = anyio.run(main)
    assert heard.error is not None and not heard.error.retryable
    assert "auth (HTTP 401)" in str(heard.error) and KEY not in str(heard.error)
    assert len(fake.connections) == 1  # not retried


def test_a_stall_after_finalize_is_a_retryable_timeout(fake: FakeDeepgram) -> None:
    fake.add(SAID.with_fault("stall", after_messages=3))
    heard = run(fake, finalize_timeout_s=0.3)
    assert heard.error is not None and heard.error.retryable and "timeout" in str(heard.error)
    assert [f.text for f in heard.finals] == ["Book a"]


def test_no_key_is_one_line() -> None:
    engine = DeepgramStt("nova-3", api_key="")
    with pytest.raises(SttError, match="no API key"):
        anyio.run(engine.start)


def test_one_retry_before_the_first_transcript(fake: FakeDeepgram) -> None:
    fake.add(TranscriptScript.http_error(429, retry_after=0.01), SAID)
    heard = run(fake, retry=True)
    assert heard.error is None and heard.text == "Book a table for two, please."
    assert len(fake.connections) == 2
    assert fake.connections[1].samples == 3.5 * 16000  # every sample reached the service once


def test_a_drop_before_any_transcript_replays_the_audio(fake: FakeDeepgram) -> None:
    fake.add(SAID.with_fault("drop", after_messages=0), SAID)
    heard = run(fake, retry=True)
    assert heard.error is None and heard.text == "Book a table for two, please."
    assert fake.connections[1].samples == 3.5 * 16000


def test_never_retried_after_a_transcript(fake: FakeDeepgram) -> None:
    fake.add(SAID.with_fault("drop", after_messages=1), SAID)
    heard = run(fake, retry=True)
    assert heard.error is not None and heard.error.retryable
    assert [t.text for t in heard.transcripts] == ["Book"]
    assert len(fake.connections) == 1


def test_only_one_retry(fake: FakeDeepgram) -> None:
    fake.add(TranscriptScript.http_error(503), TranscriptScript.http_error(503), SAID)
    heard = run(fake, retry=True)
    assert heard.error is not None and "503" in str(heard.error)
    assert len(fake.connections) == 2


def test_what_our_code_adds_to_the_finalization_time(fake: FakeDeepgram) -> None:
    """Measured, not asserted (docs/stt.md): finalize() to the final transcript,
    minus the fake's own finalization time, p50 over 30 utterances."""
    service_s = 0.05
    added: list[float] = []
    for _ in range(30):
        fake.add(TranscriptScript.of("Yes please.", finalize_s=service_s))
        heard = run(fake, seconds=1.2)
        assert heard.error is None and heard.finalize_to_final_s is not None
        added.append(heard.finalize_to_final_s - service_s)
    print(f"\ndeepgram: our code adds p50 {statistics.median(added) * 1000:.2f} ms")


def test_a_session_start_loads_no_certificates(
    fake: FakeDeepgram, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's default HTTP client would build a TLS context for every session
    (the CA bundle, ~20 ms of the event loop, while every other session's audio
    waits); the engine hands it the process's shared one."""
    import ssl

    from voice_membrane.vendors.tls import shared_ssl_context

    shared_ssl_context()  # (made once per process)
    made: list[object] = []
    real = ssl.create_default_context

    def counting(*args: object, **kwargs: object) -> ssl.SSLContext:
        made.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counting)

    async def main() -> None:
        for _ in range(3):
            engine = DeepgramStt("nova-3", api_key=KEY, base_url=fake.ws_url)
            await engine.start()
            await engine.aclose()

    anyio.run(main)
    assert made == []


def test_utterance_sockets_offer_no_compression(fake: FakeDeepgram) -> None:
    """Audio does not compress: websockets' default permessage-deflate offer
    only costs the server CPU on every frame."""
    fake.add(SAID)
    assert run(fake, seconds=1.2).error is None
    assert "sec-websocket-extensions" not in fake.connections[0].headers


def test_a_wss_socket_is_opened_with_the_shared_tls_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On wss:// websockets would build a TLS context (the CA bundle, ~20 ms of
    the event loop) for every utterance's socket; the engine passes the
    process's own. (No TLS fake here: the SDK's connect is watched instead.)"""
    import contextlib

    from deepgram.listen.v1 import client

    from voice_membrane.vendors.tls import shared_ssl_context

    seen: list[tuple[str, dict[str, object]]] = []

    @contextlib.asynccontextmanager
    async def watched(uri: str, **kwargs: object):  # type: ignore[no-untyped-def]
        seen.append((uri, kwargs))
        raise ConnectionRefusedError("watched only")
        yield

    monkeypatch.setattr(client, "websockets_client_connect", watched)

    async def main() -> None:
        engine = DeepgramStt("nova-3", api_key=KEY, base_url="wss://stt.invalid")
        await engine.start()
        with pytest.raises(SttError):
            async with engine.stream():
                pass
        await engine.aclose()

    anyio.run(main)
    [(uri, kwargs)] = seen
    assert uri.startswith("wss://stt.invalid/")
    assert kwargs["ssl"] is shared_ssl_context() and kwargs["compression"] is None
    # a stalled service holds the close for 3 x close_timeout (30 s by default)
    assert kwargs["close_timeout"] == CLOSE_TIMEOUT_S

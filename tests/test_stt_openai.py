"""The OpenAI Realtime transcription engine over the real openai SDK against the
fake session: partials then the final, commit ends the stream, faults, one retry
before the first transcript and never after, no key in any error."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

import anyio
import pytest

from voice_membrane.stt.openai_transcribe import OpenAIStt
from voice_membrane.stt.retrying import RetryingStt
from voice_membrane.testing.fake_openai_transcribe import FakeOpenAITranscribe
from voice_membrane.testing.stt_drive import Heard, drive, speech
from voice_membrane.testing.transcript_script import TranscriptScript
from voice_membrane.vendors.retry import RetryPolicy

KEY = "sk-test-0123456789abcdefghijklmnop"
SAID = TranscriptScript.of("What time is it in Lisbon?")
FAST_RETRY = RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.05)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAITranscribe]:
    with FakeOpenAITranscribe(api_key=KEY) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeOpenAITranscribe) -> FakeOpenAITranscribe:
    server.reset()
    return server


def run(
    fake: FakeOpenAITranscribe,
    model: str = "gpt-4o-mini-transcribe",
    seconds: float = 3.2,
    retry: bool = False,
    **options: object,
) -> Heard:
    async def main() -> Heard:
        engine = OpenAIStt(model, api_key=KEY, base_url=fake.base_url, **options)  # type: ignore[arg-type]
        await engine.start()
        used = RetryingStt(engine, FAST_RETRY) if retry else engine
        with anyio.fail_after(20):
            heard = await drive(used, speech(seconds))
        await engine.aclose()
        return heard

    return anyio.run(main)


def test_the_final_after_the_commit(fake: FakeOpenAITranscribe) -> None:
    fake.add(SAID)
    heard = run(fake, prompt="Place names.")
    assert heard.error is None and heard.text == SAID.text
    assert heard.transcripts[-1].final and heard.transcripts[-1].end_s == 3.2
    conn = fake.connections[0]
    assert conn.query == {"intent": "transcription"}
    session = conn.controls[0]["session"]["audio"]["input"]
    assert session["format"] == {"type": "audio/pcm", "rate": 24000}
    assert (
        session["transcription"]["prompt"] == "Place names." and session["turn_detection"] is None
    )
    assert conn.samples == 3.2 * 24000  # resampled to the session's rate
    assert conn.controls[-1] == {"type": "input_audio_buffer.commit"}


def test_partials_while_speaking_with_a_streaming_model(fake: FakeOpenAITranscribe) -> None:
    fake.add(SAID)
    heard = run(fake, model="gpt-realtime-whisper")
    assert [t.text for t in heard.partials][:2] == ["What", "What time"]
    assert heard.text == SAID.text


def test_too_little_audio_ends_with_no_final(fake: FakeOpenAITranscribe) -> None:
    heard = run(fake, seconds=0.05)
    assert heard.error is None and heard.transcripts == []
    assert {"type": "input_audio_buffer.commit"} not in fake.connections[0].controls


@pytest.mark.parametrize(
    ("script", "retryable", "words"),
    [
        (TranscriptScript.http_error(429, retry_after=3), True, "rate_limit (HTTP 429)"),
        (TranscriptScript.http_error(500), True, "server (HTTP 500)"),
        (SAID.with_fault("drop", after_messages=3), True, "connection"),
        (SAID.with_fault("malformed", after_messages=3), False, "malformed"),
    ],
)
def test_each_fault_is_the_right_error(
    fake: FakeOpenAITranscribe, script: TranscriptScript, retryable: bool, words: str
) -> None:
    fake.add(script)
    heard = run(fake)
    assert heard.error is not None and words in str(heard.error)
    assert heard.error.retryable is retryable and KEY not in str(heard.error)


def test_a_wrong_key_is_refused_not_retried_and_not_shown(fake: FakeOpenAITranscribe) -> None:
    async def main() -> Heard:
        engine = OpenAIStt("gpt-4o-mini-transcribe", api_key=KEY + "x", base_url=fake.base_url)
        await engine.start()
        return await drive(RetryingStt(engine, FAST_RETRY), speech(0.5))

    heard = anyio.run(main)
    assert heard.error is not None and not heard.error.retryable
    assert "auth (HTTP 401)" in str(heard.error) and KEY not in str(heard.error)
    assert len(fake.connections) == 1


def test_a_stall_after_the_commit_is_a_retryable_timeout(fake: FakeOpenAITranscribe) -> None:
    fake.add(SAID.with_fault("stall", after_messages=3))
    heard = run(fake, finalize_timeout_s=0.3)
    assert heard.error is not None and heard.error.retryable and "timeout" in str(heard.error)


def test_one_retry_before_the_first_transcript(fake: FakeOpenAITranscribe) -> None:
    fake.add(SAID.with_fault("drop", after_messages=2), SAID)
    heard = run(fake, retry=True)
    assert heard.error is None and heard.text == SAID.text
    assert len(fake.connections) == 2 and fake.connections[1].samples == 3.2 * 24000


def test_never_retried_after_a_transcript(fake: FakeOpenAITranscribe) -> None:
    fake.add(SAID.with_fault("drop", after_messages=3), SAID)
    heard = run(fake, model="gpt-realtime-whisper", retry=True)
    assert heard.error is not None and heard.transcripts and not heard.finals
    assert len(fake.connections) == 1


def test_what_our_code_adds_to_the_finalization_time(fake: FakeOpenAITranscribe) -> None:
    """Measured, not asserted (docs/stt.md)."""
    service_s = 0.05
    added: list[float] = []
    for _ in range(30):
        fake.add(TranscriptScript.of("Yes please.", finalize_s=service_s))
        heard = run(fake, seconds=1.2)
        assert heard.error is None and heard.finalize_to_final_s is not None
        added.append(heard.finalize_to_final_s - service_s)
    print(f"\nopenai: our code adds p50 {statistics.median(added) * 1000:.2f} ms")

"""The first-token deadline: a server that accepts and never answers ends the reply
with a typed timeout (the attempts and the deadline named) instead of keeping the
turn silent for every attempt's HTTP timeout; retries are heard as they happen."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from vendors import VENDORS, Vendor

from voice_membrane.cli.run import run_assistant
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.membrane.reply import MembraneItem, ReplyError, ReplyResult, Retrying
from voice_membrane.pipeline.build import build_parts
from voice_membrane.pipeline.config import ConfigError, PipelineConfig, load_pipeline
from voice_membrane.pipeline.session import Session
from voice_membrane.providers.openai import OpenAIProvider
from voice_membrane.sinks.null import NullSink
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import ScriptedReply
from voice_membrane.tts.espeak import EspeakEngine
from voice_membrane.vendors.errors import ProviderError
from voice_membrane.vendors.retry import FirstTokenDeadline, RetryPolicy
from voice_membrane.vocab.events import Chunk
from voice_membrane.vocab.messages import Message, ModelConfig, Request

pytestmark = pytest.mark.anyio
QUICK = RetryPolicy(max_retries=3, base_delay_s=0.05, max_delay_s=0.1)
# Every test is bounded: without the deadline a hung server would hold it for the
# SDK's whole timeout (60 s a try on defaults).
GUARD_S = 15


def request(model: str) -> Request:
    return Request(
        messages=[Message(participant="User", content="Hello?")],
        config=ModelConfig(model=model, max_tokens=100),
    )


async def collect(membrane: Membrane, model: str) -> list[MembraneItem]:
    with anyio.fail_after(GUARD_S):
        return [item async for item in membrane.stream(request(model))]


@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
async def test_a_server_that_never_answers_ends_the_reply_at_the_deadline(vendor: Vendor) -> None:
    # The SDK's own timeout (60 s) never comes into it: the deadline cuts the wait.
    with vendor.server(ScriptedReply.hang(), ScriptedReply.of("never asked")) as server:
        provider = vendor.provider(server)
        membrane = Membrane(provider, retry=QUICK, first_token_deadline_s=0.5)
        items = await collect(membrane, vendor.model)
        await provider.aclose()
        assert len(server.requests) == 1
        with anyio.fail_after(5):  # the abandoned request was let go, not left open
            while server.abandoned_requests == 0:
                await anyio.sleep(0.02)
    (error,) = [i for i in items if isinstance(i, ReplyError)]
    assert error.kind == "timeout" and not error.after_output
    assert "first-token deadline of 0.5 s" in error.message and "(1 attempt)" in error.message
    result = items[-1]
    assert isinstance(result, ReplyResult) and result.stop_reason == "error"
    assert result.error == error.message


async def test_the_deadline_spans_every_attempt_and_says_how_many_were_made() -> None:
    # Each attempt times out after 0.3 s and is retried; the fourth cannot finish
    # before the deadline, which ends the reply however many retries were left.
    with FakeOpenAI(*[ScriptedReply.hang() for _ in range(6)]) as server:
        provider = OpenAIProvider(api_key="k", base_url=server.base_url, timeout_s=0.3)
        policy = RetryPolicy(max_retries=5, base_delay_s=0.05, max_delay_s=0.05, jitter=0)
        membrane = Membrane(provider, retry=policy, first_token_deadline_s=1.0)
        items = await collect(membrane, "gpt-test")
        await provider.aclose()
        attempts = len(server.requests)
    retries = [i for i in items if isinstance(i, Retrying)]
    (error,) = [i for i in items if isinstance(i, ReplyError)]
    assert 2 <= attempts < 6 and len(retries) == attempts - 1
    assert error.kind == "timeout" and f"({attempts} attempts; last error: " in error.message


async def test_a_wait_that_would_pass_the_deadline_is_not_taken() -> None:
    busy = ScriptedReply.http_error(503, retry_after=30, message="busy")
    with FakeOpenAI(busy, ScriptedReply.of("too late")) as server:
        provider = OpenAIProvider(api_key="k", base_url=server.base_url)
        # The default policy would wait 20 s (retry-after, capped) before retrying.
        membrane = Membrane(provider, retry=RetryPolicy(), first_token_deadline_s=2.0)
        items = await collect(membrane, "gpt-test")
        await provider.aclose()
        assert len(server.requests) == 1
    assert not [i for i in items if isinstance(i, Retrying)]
    (error,) = [i for i in items if isinstance(i, ReplyError)]
    assert error.kind == "timeout" and "HTTP 503" in error.message and "busy" in error.message


async def test_the_deadline_covers_only_the_wait_for_the_first_output() -> None:
    # The reply streams for longer than the deadline once it has begun: all of it stays.
    words = "one two three four five six seven eight nine ten."
    slow = ScriptedReply.of(words, delta_chars=5, delta_delay_s=0.1)
    with FakeOpenAI(slow) as server:
        provider = OpenAIProvider(api_key="k", base_url=server.base_url)
        membrane = Membrane(provider, retry=QUICK, first_token_deadline_s=0.4)
        items = await collect(membrane, "gpt-test")
        await provider.aclose()
    assert not [i for i in items if isinstance(i, ReplyError)]
    assert "".join(i.text for i in items if isinstance(i, Chunk)) == words


def test_the_deadline_arithmetic() -> None:
    deadline = FirstTokenDeadline.starting(2.0, now=10.0)
    assert not deadline.passed(11.9) and deadline.passed(12.0)
    assert deadline.allows_wait(1.0, now=10.5) and not deadline.allows_wait(1.5, now=10.5)
    unbounded = FirstTokenDeadline.starting(None, now=10.0)
    assert not unbounded.passed(1e9) and unbounded.allows_wait(1e9, now=1e9)
    error = deadline.error("openai", 3, ProviderError("openai", "timeout", "slow"))
    assert error.kind == "timeout" and error.retryable
    assert str(error) == (
        "openai: timeout: no output within the first-token deadline of 2 s "
        "(3 attempts; last error: openai: timeout: slow)"
    )


def test_a_deadline_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="first_token_deadline_s must be positive"):
        Membrane(FakeProviderless(), first_token_deadline_s=0)  # type: ignore[arg-type]
    path = tmp_path / "p.toml"
    path.write_text("[llm]\nfirst_token_deadline_s = 0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"llm\.first_token_deadline_s: Input should be greater"):
        load_pipeline(path)


class FakeProviderless:
    """Never called: the membrane refuses its options first."""

    name = "none"


# ------------------------------------------------------------------ heard as it happens


def pipeline(tmp_path: Path, base_url: str, deadline: str = "first_token_deadline_s = 5") -> Path:
    path = tmp_path / "cloud.toml"
    path.write_text(
        f"""[llm]
spec = "openai:gpt-test"
base_url = "{base_url}"
api_key_env = "MY_OPENAI_KEY"
{deadline}
[tts]
spec = "espeak"
[sink]
kind = "null"
""",
        encoding="utf-8",
    )
    return path


async def test_a_session_hears_each_retry_before_the_reply_arrives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_OPENAI_KEY", "k")
    busy = ScriptedReply.http_error(503, retry_after=0.05, message="busy")
    with FakeOpenAI(busy, busy, ScriptedReply.of("Hello.")) as server:
        parts = build_parts(load_pipeline(pipeline(tmp_path, server.base_url)))
        assert parts.membrane.first_token_deadline_s == 5
        heard: list[tuple[int, bool]] = []
        session = Session(parts.membrane, parts.engine, parts.sink, model=parts.model)

        def on_retry(retrying: Retrying) -> None:
            assert session.current is not None
            started = "first_token" in session.current.metrics.stamps
            heard.append((retrying.attempt, started))

        session.on_retry = on_retry
        async with session:
            with anyio.fail_after(GUARD_S):
                result = await session.turn("Hi!")
    assert heard == [(1, False), (2, False)]  # each one before any of the reply
    assert result.spoken_text == "Hello." and len(result.report.retries) == 2


async def test_run_prints_a_retry_when_it_happens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_OPENAI_KEY", "k")
    busy = ScriptedReply.http_error(503, retry_after=0.2, message="busy")
    printed: list[str] = []
    with FakeOpenAI(busy, ScriptedReply.of("Hello there.")) as server:
        config = load_pipeline(pipeline(tmp_path, server.base_url))
        with anyio.fail_after(GUARD_S):
            await run_assistant(config, prompt="Hi!", out=printed.append)
    text = "".join(printed)
    line = "retrying in 0.2 s (attempt 2): openai: overloaded (HTTP 503): busy\n"
    assert line in text
    assert text.index(line) < text.index("Hello there.") < text.index("retried: ")


def test_the_deadline_each_pipeline_gets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_OPENAI_KEY", "k")
    cloud = load_pipeline(pipeline(tmp_path, "http://127.0.0.1:9/v1"))
    assert build_parts(cloud).membrane.first_token_deadline_s == 5  # as the file says
    cloud_default = load_pipeline(pipeline(tmp_path, "http://127.0.0.1:9/v1", deadline=""))
    assert build_parts(cloud_default).membrane.first_token_deadline_s == 20
    # The embedded model computes, it does not wait on a server: no deadline unless set.
    assert build_parts(PipelineConfig()).membrane.first_token_deadline_s is None
    local = PipelineConfig().with_overrides({"llm": {"first_token_deadline_s": 90}})
    assert build_parts(local).membrane.first_token_deadline_s == 90
    # Imported here, not at collection: see test_long_sessions.py.
    from voice_membrane.providers.local_llama import LocalLlama

    session = Session(LocalLlama(), EspeakEngine(), NullSink())
    assert session.membrane.first_token_deadline_s is None

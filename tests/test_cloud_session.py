"""A cloud provider in a session: base URL and key from the pipeline file, a retry
reported in the turn's metrics, and an interrupted turn that closes the provider's
HTTP stream with the rest."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import pytest

from voice_membrane.pipeline.build import build_parts
from voice_membrane.pipeline.config import ConfigError, load_pipeline
from voice_membrane.pipeline.session import Session
from voice_membrane.pipeline.turn import TurnResult
from voice_membrane.sinks.null import NullSink
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import Fault, ScriptedReply, thinking
from voice_membrane.vocab.messages import Message

pytestmark = pytest.mark.anyio
ANSWER = "Here is a long answer. " * 40


def pipeline(tmp_path: Path, base_url: str, key_env: str = "MY_OPENAI_KEY") -> Path:
    path = tmp_path / "cloud.toml"
    path.write_text(
        f"""description = "openai through a pipeline file"
[llm]
spec = "openai:gpt-test"
base_url = "{base_url}"
api_key_env = "{key_env}"
max_tokens = 300
system_prompt = "Be brief."
user_name = "Ada"
[tts]
spec = "espeak"
[sink]
kind = "null"
""",
        encoding="utf-8",
    )
    return path


async def test_base_url_key_names_and_a_retry_in_a_session_from_a_pipeline_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MY_OPENAI_KEY", "secret-from-file-config")
    busy = ScriptedReply.http_error(503, retry_after=0.05, message="busy")
    with FakeOpenAI(busy, ScriptedReply.of(thinking("plan"), "Hello, Ada.")) as server:
        config = load_pipeline(pipeline(tmp_path, server.base_url))
        parts = build_parts(config)
        session = Session(
            parts.membrane,
            parts.engine,
            parts.sink,
            system_prompt=config.llm.system_prompt,
            model=parts.model,
            options=parts.options,
        )
        async with session:
            result = await session.turn("Hi!")
        _, request = server.requests
    assert result.error is None and result.spoken_text == "Hello, Ada."
    assert result.report.llm == "openai:gpt-test"
    (retried,) = result.report.retries  # the report says why the first token was late
    assert "HTTP 503" in retried and "busy" in retried and "waited 0.05 s" in retried
    assert "retried: " in result.report.table() and result.report.to_dict()["retries"]
    # The provider's token counts and why the reply ended, as the fake reported them.
    assert result.report.stop_reason == "end_turn"
    assert result.report.usage["input_tokens"] > 0 and result.report.usage["output_tokens"] > 0
    assert "reply: stop end_turn, input tokens " in result.report.table()
    assert request.headers["authorization"] == "Bearer secret-from-file-config"
    assert request.body["model"] == "gpt-test" and request.body["max_tokens"] == 300
    assert request.body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [b.type for b in result.blocks] == ["thinking", "text"]


def test_a_named_key_variable_that_is_not_set_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    config = load_pipeline(pipeline(tmp_path, "http://127.0.0.1:9/v1", "NOT_SET_KEY"))
    with pytest.raises(ConfigError, match="api_key_env names NOT_SET_KEY, which is not set"):
        build_parts(config)


async def test_interrupting_a_turn_closes_the_provider_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_OPENAI_KEY", "k")
    slow = ScriptedReply.of(ANSWER, delta_chars=6, delta_delay_s=0.02)
    with FakeOpenAI(slow) as server:
        parts = build_parts(load_pipeline(pipeline(tmp_path, server.base_url)))
        sink = NullSink(sample_rate=22050, realtime=True)
        session = Session(parts.membrane, parts.engine, sink, model=parts.model)
        tasks_before = len(asyncio.all_tasks())
        results: list[TurnResult] = []
        async with session:

            async def speak() -> None:
                results.append(await session.turn("Talk for a while."))

            async with anyio.create_task_group() as tg:
                tg.start_soon(speak)
                while (
                    session.current is None or "first_audio" not in session.current.metrics.stamps
                ):
                    await anyio.sleep(0.01)
                assert session.interrupt()
            assert len(asyncio.all_tasks()) == tasks_before  # nothing outlived the turn
        with anyio.fail_after(5):
            while server.cancelled_streams == 0:
                await anyio.sleep(0.01)
    (result,) = results
    assert result.interrupted and result.error is None
    assert len(result.visible_text) < len(ANSWER)  # the LLM was still streaming


async def test_a_stream_dropped_mid_word_is_spoken_to_the_last_complete_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_OPENAI_KEY", "k")
    # 4-character deltas; the connection drops after "Hello there. The fir".
    dropped = ScriptedReply.of(
        "Hello there. The first step.", delta_chars=4, fault=Fault("drop", after_deltas=5)
    )
    records: list[dict[str, Any]] = []
    with FakeOpenAI(dropped) as server:
        parts = build_parts(load_pipeline(pipeline(tmp_path, server.base_url)))
        session = Session(parts.membrane, parts.engine, NullSink(), log=records.append)
        async with session:
            result = await session.turn("Hi!")
            history = session.request("next").messages
    assert result.error is not None and result.visible_text == "Hello there. The fir"
    assert [r["text"] for r in records if r["event"] == "tts_input"] == ["Hello there.", "The"]
    assert result.spoken_text == "Hello there. The"
    assert history[-2] == Message(participant="Assistant", content="Hello there. The")

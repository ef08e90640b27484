"""Long sessions: before each turn the oldest turns are dropped so the request
fits the model's context; the system prompt and the new turn always stay, and
the turn's report says what was dropped. (The embedded model's exact count, on
the real tokenizer, is tested in test_local_llama.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from session_helpers import REPLY, AskedSource, write_recording

from voice_membrane.membrane.membrane import Membrane
from voice_membrane.pipeline.build import CLOUD_CONTEXT_TOKENS, build_parts
from voice_membrane.pipeline.config import ConfigError, PipelineConfig, load_pipeline
from voice_membrane.pipeline.history import (
    EstimatedTokens,
    SourceTokens,
    estimate_tokens,
    fit,
)
from voice_membrane.pipeline.session import Session
from voice_membrane.providers.base import ChatMessage
from voice_membrane.providers.text_source import TextSourceProvider
from voice_membrane.sinks.null import NullSink
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import ScriptedReply
from voice_membrane.testing.silent_engine import SilentEngine
from voice_membrane.vocab.messages import Message, ModelConfig, Request

pytestmark = pytest.mark.anyio
SYSTEM = "Be brief."


def said(n: int) -> str:
    return f"Question number {n}: what is the weather like?"


async def test_a_hundred_turns_stay_within_the_budget(tmp_path: Path) -> None:
    source = AskedSource(write_recording(tmp_path / "reply.jsonl"))
    budget = 400  # room for about seven turns of this conversation
    session = Session(
        source, SilentEngine(), NullSink(), system_prompt=SYSTEM, context=EstimatedTokens(budget)
    )
    dropped_before, trims = 0, 0
    async with session:
        for n in range(100):
            result = await session.turn(said(n))
            assert result.error is None and result.spoken_text == REPLY
            fitted = result.report.context
            assert fitted is not None and not fitted.exact
            assert fitted.tokens <= budget and fitted.budget == budget
            assert fitted.dropped + fitted.kept == n  # every earlier turn: sent or dropped
            assert fitted.dropped >= dropped_before  # a dropped turn stays dropped
            if fitted.dropped == dropped_before and n > 0:
                # No trim: the request grows on the last one unchanged (a prefix cache holds).
                assert source.asked[-1][: len(source.asked[-2])] == source.asked[-2]
            else:
                trims += n > 0
            dropped_before = fitted.dropped
            # What the source was sent: the system prompt, the newest turns, this one.
            asked = source.asked[-1]
            assert asked[0] == ChatMessage("system", SYSTEM)
            assert asked[-1] == ChatMessage("user", said(n))
            users = [m.content for m in asked[1:-1] if m.role == "user"]
            assert users == [said(k) for k in range(fitted.dropped, n)]
    assert 80 < dropped_before < 100  # most of the session was dropped, a few turns kept
    assert 0 < trims * 2 < dropped_before  # turns are dropped a few at a time, not one a turn
    report = result.report
    assert f"history: oldest {report.context.dropped} turns dropped" in report.table()  # type: ignore[union-attr]
    assert f"of {budget} tokens, estimated)" in report.table()
    data = json.loads(report.to_json())["context"]
    assert data == {
        "turns_dropped": dropped_before,
        "turns_kept": 100 - 1 - dropped_before,
        "tokens": data["tokens"],
        "budget": budget,
        "exact": False,
    }


async def test_a_turn_too_long_for_the_budget_still_keeps_the_system_prompt_and_itself(
    tmp_path: Path,
) -> None:
    source = AskedSource(write_recording(tmp_path / "reply.jsonl"))
    session = Session(
        source, SilentEngine(), NullSink(), system_prompt=SYSTEM, context=EstimatedTokens(100)
    )
    async with session:
        await session.turn("Hi.")
        result = await session.turn("Tell me everything. " * 40)
    fitted = result.report.context
    assert fitted is not None and fitted.dropped == 1 and fitted.kept == 0
    assert fitted.tokens > fitted.budget and "over budget" in result.report.table()
    assert [m.role for m in source.asked[-1]] == ["system", "user"]


async def test_without_a_budget_nothing_is_dropped_or_reported(tmp_path: Path) -> None:
    source = AskedSource(write_recording(tmp_path / "reply.jsonl"))
    session = Session(source, SilentEngine(), NullSink())
    assert session.context is None  # a recording knows no context size
    async with session:
        for n in range(3):
            result = await session.turn(said(n))
    assert result.report.context is None and "history:" not in result.report.table()
    assert len(source.asked[-1]) == 5
    assert json.loads(result.report.to_json())["context"] is None


async def test_fit_drops_whole_turns_from_the_oldest() -> None:
    turns = [("one " * 30, "reply " * 30), ("two", "reply two"), ("three", "reply three")]

    def build(first: int) -> Request:
        messages = []
        for user, assistant in turns[first:]:
            messages += [Message(participant="User", content=user)]
            messages += [Message(participant="Assistant", content=assistant)]
        messages.append(Message(participant="User", content="now"))
        return Request(messages=messages, config=ModelConfig(model="m"), system_prompt=SYSTEM)

    whole = estimate_tokens(build(0))
    request, fitted = await fit(0, 3, build, EstimatedTokens(whole))
    assert fitted.dropped == 0 and request == build(0)  # it fits: nothing dropped
    request, fitted = await fit(0, 3, build, EstimatedTokens(whole - 1))
    assert fitted.dropped == 1 and fitted.kept == 2 and request == build(1)
    assert fitted.tokens == estimate_tokens(build(1))
    # Over budget, turns go until the request fits three quarters of it.
    budget = estimate_tokens(build(1)) + 1
    request, fitted = await fit(1, 3, build, EstimatedTokens(budget))
    assert fitted.tokens <= budget and request == build(1)  # fits: kept as it is
    request, fitted = await fit(0, 3, build, EstimatedTokens(budget), trim_to=0.75)
    assert estimate_tokens(build(2)) <= 0.75 * budget < estimate_tokens(build(1))
    assert fitted.dropped == 2 and request == build(2)
    # Starting from an earlier fit, the turns it dropped are not considered again.
    request, fitted = await fit(2, 3, build, EstimatedTokens(whole))
    assert fitted.dropped == 2 and request == build(2)


def test_the_estimate_counts_characters_and_messages() -> None:
    request = Request(
        messages=[Message(participant="User", content="x" * 30)],
        config=ModelConfig(model="m"),
        system_prompt="y" * 6,
    )
    assert estimate_tokens(request) == (30 + 6) // 3 + 4 * 2


# ------------------------------------------------------------------ pipeline files


def pipeline(tmp_path: Path, llm: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(f'[llm]\n{llm}\n[tts]\nspec = "espeak"\n[sink]\nkind = "null"\n')
    return path


async def test_a_cloud_session_is_trimmed_to_its_configured_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "k")
    replies = [ScriptedReply.of("Fine, thanks.") for _ in range(12)]
    with FakeOpenAI(*replies) as server:
        llm = (
            f'spec = "openai:gpt-test"\nbase_url = "{server.base_url}"\n'
            f'api_key_env = "MY_KEY"\ncontext_tokens = 100\nsystem_prompt = "{SYSTEM}"'
        )
        parts = build_parts(load_pipeline(pipeline(tmp_path, llm)))
        assert isinstance(parts.context, EstimatedTokens) and parts.context.budget == 100
        session = Session(
            parts.membrane,
            SilentEngine(),
            parts.sink,
            system_prompt=SYSTEM,
            model=parts.model,
            context=parts.context,
        )
        async with session:
            for n in range(12):
                result = await session.turn(said(n))
        sent = [request.body["messages"] for request in server.requests]
    fitted = result.report.context
    assert fitted is not None and fitted.dropped > 0 and fitted.tokens <= 100
    assert sent[-1][0] == {"role": "system", "content": SYSTEM}
    assert sent[-1][-1] == {"role": "user", "content": said(11)}
    assert len(sent[-1]) == 2 + 2 * fitted.kept < len(sent[0]) + 2 * 11


def test_the_budget_each_pipeline_gets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "k")
    cloud = build_parts(
        load_pipeline(pipeline(tmp_path, 'spec = "openai:m"\napi_key_env = "MY_KEY"'))
    )
    assert isinstance(cloud.context, EstimatedTokens)
    assert cloud.context.budget == CLOUD_CONTEXT_TOKENS
    # The embedded model: its context less max_tokens, counted by its tokenizer
    # (nothing is loaded to build the parts).
    local = build_parts(PipelineConfig().with_overrides({"llm": {"max_tokens": 200}}))
    assert isinstance(local.context, SourceTokens) and local.context.budget == 2048 - 200
    capped = build_parts(PipelineConfig().with_overrides({"llm": {"context_tokens": 1000}}))
    assert isinstance(capped.context, SourceTokens) and capped.context.budget == 1000
    replay = PipelineConfig().with_overrides({"llm": {"spec": f"replay:{tmp_path / 'r.jsonl'}"}})
    write_recording(tmp_path / "r.jsonl")
    assert build_parts(replay).context is None


def test_a_budget_too_small_is_one_line_and_a_long_reply_leaves_half_the_context() -> None:
    with pytest.raises(ConfigError, match=r"llm\.context_tokens: Input should be greater"):
        PipelineConfig().with_overrides({"llm": {"context_tokens": 10}})
    long_replies = build_parts(PipelineConfig().with_overrides({"llm": {"max_tokens": 4096}}))
    assert long_replies.context is not None and long_replies.context.budget == 1024


def test_an_embedded_source_is_fitted_by_default() -> None:
    # Imported here: imported at collection, before test_local_llama.py imports
    # llama_cpp, the module holding the loaded model would be torn down after
    # llama_cpp at exit, and llama.cpp's __del__ then fails ("Exception ignored").
    from voice_membrane.providers.local_llama import LocalLlama

    session = Session(LocalLlama(max_tokens=100), SilentEngine(), NullSink())
    assert isinstance(session.context, SourceTokens) and session.context.budget == 1948
    membrane = Membrane(TextSourceProvider(LocalLlama()))
    capped = Session(
        membrane,
        SilentEngine(),
        NullSink(),
        context=SourceTokens(LocalLlama(), membrane.formatter, 500),
    )
    assert capped.context is not None and capped.context.budget == 500

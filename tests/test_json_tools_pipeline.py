"""Issue 13 end to end, as ``voice-membrane run`` runs a turn: a model that writes
its tool call as JSON in its text (the fake OpenAI server plays it) has the call
taken out before it is spoken, run on the test MCP server, and its result sent
back; a judged call is blocked and the model told why; a banned phrase in the
answer never reaches the voice."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from voice_membrane.cli.run import run_assistant
from voice_membrane.formats import get_formatter
from voice_membrane.pipeline.build import build_parts
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.providers.text_source import chat_messages
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import ScriptedReply
from voice_membrane.vocab.messages import Message, ModelConfig, Request, ToolDefinition

pytestmark = pytest.mark.anyio
GUARD_S = 60  # against a hang only
NARRATIVE = "Let me check the forecast."
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
TOOL_OUTPUT = "Paris: sunny, high of 21 °C"
ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    path = tmp_path / "json-tools.toml"
    path.write_text(
        f"""[llm]
spec = "openai:gpt-test"
base_url = "{base_url}"
api_key_env = "MY_OPENAI_KEY"
tool_syntax = "json"

[tts]
spec = "espeak"

[sink]
kind = "null"

[[tools.mcp]]
name = "weather"
command = ["{sys.executable}", "-m", "voice_membrane.testing.mcp_weather"]
{extra}""",
        encoding="utf-8",
    )
    return path


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_OPENAI_KEY", "k")


async def test_a_json_call_in_the_text_runs_on_the_mcp_server_and_is_never_spoken(
    tmp_path: Path,
) -> None:
    first = ScriptedReply.of(f"{NARRATIVE} {CALL}", delta_chars=4)
    second = ScriptedReply.of("It is sunny in Paris, with a high of 21 degrees.")
    with FakeOpenAI(first, second) as fake:
        config = load_pipeline(write(tmp_path, fake.base_url))
        with anyio.fail_after(GUARD_S):
            (result,) = await run_assistant(config, prompt="Weather in Paris?", out=lambda _: None)
        bodies = [request.body for request in fake.requests]
    assert result.error is None, result.error
    (call,) = [b for b in result.blocks if b.type == "tool_call"]
    assert (call.tool_name, call.input) == ("get_weather", {"city": "Paris"})
    (tool_result,) = [b for b in result.blocks if b.type == "tool_result"]
    assert (tool_result.content, tool_result.is_error) == (TOOL_OUTPUT, False)
    assert len(bodies) == 2 and TOOL_OUTPUT in json.dumps(bodies[1], ensure_ascii=False)
    spoken = " ".join(result.spoken_text.split())
    assert spoken == f"{NARRATIVE} It is sunny in Paris, with a high of 21 degrees."
    assert "tool_call" not in result.visible_text and "get_weather" not in result.visible_text


async def test_a_judged_call_is_blocked_and_a_banned_phrase_never_spoken(tmp_path: Path) -> None:
    first = ScriptedReply.of(f"{NARRATIVE} {CALL}", delta_chars=3)
    second = ScriptedReply.of("I may not check that. Top secret stuff. Ask me another.")
    policy = '\n[policy]\nallow_tools = ["set_timer"]\nbanned_phrases = ["top secret"]\n'
    policy += 'banned_replacement = ""\n'
    with FakeOpenAI(first, second) as fake:
        config = load_pipeline(write(tmp_path, fake.base_url, policy))
        with anyio.fail_after(GUARD_S):
            (result,) = await run_assistant(config, prompt="Weather in Paris?", out=lambda _: None)
        bodies = [request.body for request in fake.requests]
    (tool_result,) = [b for b in result.blocks if b.type == "tool_result"]
    assert tool_result.is_error and "not allowed" in (tool_result.content or "")
    assert TOOL_OUTPUT not in json.dumps(bodies[1], ensure_ascii=False)  # never ran
    assert "not allowed" in json.dumps(bodies[1])
    spoken = " ".join(result.spoken_text.split())
    assert spoken == f"{NARRATIVE} I may not check that. Ask me another."


def test_the_local_tools_pipeline_reads_json_calls_and_offers_the_weather_tool() -> None:
    config = load_pipeline(ROOT / "pipelines" / "local-tools.toml")
    assert config.llm.tool_syntax == "json" and config.llm.json_tool_mode == "placeholder"
    parts = build_parts(config)
    assert parts.membrane.json_tools is not None
    assert parts.toolbox is not None


def test_a_text_only_model_is_told_how_to_call_tools_and_sees_its_calls() -> None:
    request = Request(
        messages=[Message(participant="User", content="Weather?")],
        config=ModelConfig(model="local", max_tokens=50),
        tools=[
            ToolDefinition(
                name="get_weather",
                description="The forecast.",
                input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
            )
        ],
        system_prompt="Be brief.",
    )
    (system, user) = chat_messages(get_formatter("native").build(request))
    assert system.content.startswith("Be brief.\n\nYou can call these tools.")
    assert '<tool_call>{"name": "TOOL_NAME"' in system.content
    assert "- get_weather: The forecast." in system.content and '"city"' in system.content
    assert user.content == "Weather?"


async def test_the_local_tools_pipeline_runs_a_recorded_json_call_on_the_mcp_server() -> None:
    # pipelines/local-tools.toml as shipped (the MCP weather server over stdio), with
    # the embedded model replaced by a recording of a small model's two replies: a
    # JSON call in its text, then the answer once the result is written back.
    recording = ROOT / "audio_fixtures" / "streams" / "json_tool_turn.jsonl"
    config = load_pipeline(ROOT / "pipelines" / "local-tools.toml").with_overrides(
        {
            "llm": {"spec": f"replay:{recording}", "replay_speed": 0},
            "tts": {"spec": "espeak"},
            "sink": {"kind": "null"},
        }
    )
    with anyio.fail_after(GUARD_S):
        (result,) = await run_assistant(config, prompt="Weather in Paris?", out=lambda _: None)
    assert result.error is None, result.error
    (tool_result,) = [b for b in result.blocks if b.type == "tool_result"]
    assert (tool_result.content, tool_result.is_error) == (TOOL_OUTPUT, False)
    # The call is never said; the placeholder is, while the call runs.
    assert " ".join(result.spoken_text.split()) == (
        "Let me check the forecast for you. One moment. "
        "It is sunny in Paris today, with a high of 21 degrees. Enjoy your walk!"
    )

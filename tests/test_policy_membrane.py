"""Stream policies wired into Membrane and the pipeline: a rejected tool call
never runs and the model is told why, a terminated reply keeps what passed, and
a banned phrase never reaches the voice — over every vendor and both modes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from vendors import VENDORS, Vendor

from voice_membrane.infra.redact import KEY_VARIABLES, forget_all
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.membrane.reply import MembraneItem, ReplyResult
from voice_membrane.membrane.tools import ToolCall
from voice_membrane.parse.policy import PolicyContext, StreamState, ToolAllowList
from voice_membrane.pipeline.build import build_parts, session_for
from voice_membrane.pipeline.config import ConfigError, load_pipeline
from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.sinks.null import NullSink
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.script import ScriptedReply, text, tool_use
from voice_membrane.vocab.events import Chunk, Event
from voice_membrane.vocab.messages import (
    Message,
    ModelConfig,
    Request,
    RequestOptions,
    ToolDefinition,
)

pytestmark = pytest.mark.anyio
TOOLS = [
    ToolDefinition(name=name, input_schema={"type": "object", "properties": {}})
    for name in ("get_weather", "delete_files")
]


def request(model: str) -> Request:
    return Request(
        messages=[Message(participant="User", content="Weather in Paris?")],
        config=ModelConfig(model=model, max_tokens=300),
        tools=TOOLS,
        options=RequestOptions(assistant_participant="Claude"),
    )


class Handler:
    def __init__(self) -> None:
        self.ran: list[str] = []

    async def __call__(self, calls: list[ToolCall]) -> list[str]:
        self.ran += [call.name for call in calls]
        return [f"{call.name} done" for call in calls]


def visible(items: list[MembraneItem]) -> str:
    return "".join(i.text for i in items if isinstance(i, Chunk) and i.meta.visible)


@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
async def test_a_rejected_call_never_runs_and_the_model_is_told(vendor: Vendor) -> None:
    first = ScriptedReply.of(
        text("Checking."),
        tool_use("get_weather", {"city": "Paris"}, id="call_w"),
        tool_use("delete_files", {"path": "/"}, id="call_d"),
    )
    second = ScriptedReply.of("It is sunny.")
    handler = Handler()
    with vendor.server(first, second) as server:
        provider = vendor.provider(server)
        membrane = Membrane(provider, "native", policies=lambda: [ToolAllowList({"get_weather"})])
        items = [i async for i in membrane.stream(request(vendor.model), on_tool_calls=handler)]
        await provider.aclose()
        bodies = [r.body for r in server.requests]
    assert handler.ran == ["get_weather"]
    result = items[-1]
    assert isinstance(result, ReplyResult) and result.error is None
    assert visible(items) == "Checking.It is sunny."
    # The rejected call is in the reply (the model sees its call answered) but no
    # event of it passed to the consumer (the log, the voice).
    called = [b.tool_name for b in result.blocks if b.type == "tool_call"]
    assert called == ["get_weather", "delete_files"]
    events = [i for i in items if isinstance(i, Chunk)]
    assert not [
        e for e in events if e.meta.tool_name == "delete_files" and e.meta.type == "tool_call"
    ]
    results = {b.tool_id: b for b in result.blocks if b.type == "tool_result"}
    assert results["call_w"].content == "get_weather done" and not results["call_w"].is_error
    assert results["call_d"].is_error and "not allowed" in (results["call_d"].content or "")
    assert "not allowed" in json.dumps(bodies[1])


async def test_prefill_mode_rejects_an_xml_call_the_same_way() -> None:
    first = ScriptedReply.of(
        'Checking.\n<function_calls>\n<invoke name="delete_files">'
        '<parameter name="path">/</parameter></invoke>\n',
        stop_reason="stop_sequence",
        stop_sequence="</function_calls>",
        delta_chars=5,
    )
    second = ScriptedReply.of("\nI may not do that.")
    handler = Handler()
    with FakeAnthropic(first, second) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        membrane = Membrane(provider, "anthropic-xml", policies=lambda: [ToolAllowList(set())])
        items = [i async for i in membrane.stream(request("claude-test"), on_tool_calls=handler)]
        await provider.aclose()
        bodies = [r.body for r in server.requests]
    assert handler.ran == []
    result = items[-1]
    assert isinstance(result, ReplyResult) and result.tool_rounds == 1
    assert visible(items) == "Checking.\n\nI may not do that."
    assert "not allowed" in json.dumps(bodies[1]) and "<error" in json.dumps(bodies[1])


class StopOnSecret:
    def on_chunk(self, event: Event, state: StreamState, context: PolicyContext) -> None:
        if state.current is not None and "secret" in state.current.text:
            context.terminate("it started on the secret")


async def test_a_terminated_reply_ends_at_once_and_keeps_what_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No key known: text that may begin one is held back a moment by the secret
    # filter, which would move where the deltas below are cut.
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    forget_all()
    reply = ScriptedReply.of("Sure. The secret is " + "x " * 400, delta_chars=4)
    with FakeAnthropic(reply) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        membrane = Membrane(provider, "native")
        items = [
            i async for i in membrane.stream(request("claude-test"), policies=[StopOnSecret()])
        ]
        await provider.aclose()
    result = items[-1]
    assert isinstance(result, ReplyResult)
    assert result.terminated == "it started on the secret" and result.stop_reason == "policy"
    # 4-character deltas: the one that completed "secret" and everything after it
    # went nowhere.
    assert visible(items) == "Sure. The se"
    assert result.text == "" or result.text.startswith("Sure.")  # the block never completed


def write_pipeline(folder: Path, reply: str, policy: str) -> Path:
    recording = folder / "reply.jsonl"
    lines = [{"format": "voice-membrane-replay", "version": 1, "mode": "prefill"}]
    lines += [{"t_ms": i, "text": reply[i : i + 3]} for i in range(0, len(reply), 3)]
    recording.write_text("".join(json.dumps(line) + "\n" for line in lines))
    path = folder / "guarded.toml"
    path.write_text(
        f'[llm]\nspec = "replay:{recording.name}"\nreplay_speed = 0\n\n'
        f'[tts]\nspec = "espeak"\n\n[sink]\nkind = "null"\n\n[policy]\n{policy}\n'
    )
    return path


async def test_a_banned_phrase_never_reaches_the_voice(tmp_path: Path) -> None:
    # Disguised as the speakable text undoes it: emphasis, a link, an emoji, a
    # Cyrillic letter. Judged on what the voice gets, none of it is said.
    reply = "Sure. The **secret** plan is simple. We go at noon. Damn! "
    reply += "[Top](http://x.io)🙈\u0455ecret! Bye."
    config = load_pipeline(
        write_pipeline(
            tmp_path,
            reply,
            'banned_phrases = ["secret plan", "damn", "top secret"]\nbanned_replacement = "Hmm."',
        )
    )
    parts = build_parts(config)
    pieces: list[str] = []
    records: list[dict[str, Any]] = []
    session = session_for(
        config, parts, sink=NullSink(), on_piece_start=pieces.append, log=records.append
    )
    async with session:
        result = await session.turn("What is the plan?")
    spoken = " ".join(pieces).lower()
    assert "damn" not in spoken and "secret" not in spoken and "plan" not in spoken
    tts_input = " ".join(r["text"] for r in records if r.get("event") == "tts_input")
    assert "secret" not in tts_input.lower() and "top" not in tts_input.lower()
    assert result.spoken_text == "Sure. The Hmm. We go at noon. Hmm. Hmm. Bye."
    # What the history keeps is what was said; the transcript is the model's own text.
    assert session.request("next").messages[-2].content[0].text == result.spoken_text  # type: ignore[union-attr]
    assert "**secret** plan" in result.visible_text
    assert result.terminated is None


@pytest.mark.parametrize(
    ("policy", "problem"),
    [
        ('banned_phrases = [" "]', "blank"),
        ('banned_action = "shout"', "banned_action"),
        ('banned_phrases = ["🙈"]', "no letter or digit"),
        ('banned_phrases = ["say that"]\nbanned_replacement = "I won\'t say that."', "replacement"),
        ("allow_tools = 3", "allow_tools"),
    ],
)
def test_bad_policy_keys_are_one_line_errors(tmp_path: Path, policy: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        load_pipeline(write_pipeline(tmp_path, "Hi.", policy))
    assert "\n" not in str(caught.value)


def test_policy_sections_build_their_policies(tmp_path: Path) -> None:
    config = load_pipeline(write_pipeline(tmp_path, "Hi.", 'allow_tools = ["get_weather"]'))
    made: Any = build_parts(config).membrane.policies
    assert [type(p).__name__ for p in made()] == ["ToolAllowList"]
    assert made() is not made()  # fresh per reply
    bare = load_pipeline(write_pipeline(tmp_path, "Hi.", ""))
    assert build_parts(bare).membrane.policies is None

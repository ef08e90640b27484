"""Model output is untrusted input, end to end: each vendor's fake server sends
what a script cannot say — an event type the reader does not know, a field of
the wrong JSON type, a delta that does not belong to the open block, a lone
surrogate — through the real SDK, and the reply goes on: nothing hidden is
spoken, nothing raises, what was produced is kept. Also: tool calls with no id
or no name, and lone surrogates at the byte edges (espeak, the event log, the
demo, the console)."""

from __future__ import annotations

import io
import json
import logging
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from voice_membrane.cli.demo import run_demo
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.membrane.reply import MembraneItem, ReplyError, ReplyResult
from voice_membrane.membrane.reply_messages import conversation
from voice_membrane.membrane.tool_round import runnable_calls
from voice_membrane.membrane.tools import tool_handler
from voice_membrane.pipeline.event_log import HiddenBlockPrinter, JsonlEventLog
from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.providers.gemini import GeminiProvider
from voice_membrane.providers.openai import OpenAIProvider
from voice_membrane.providers.replay import load_recording
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.fake_gemini import FakeGemini
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import RawEvent, ScriptedReply, thinking, tool_use
from voice_membrane.tts.espeak import EspeakEngine, _text_lines
from voice_membrane.vendors.retry import NO_RETRY
from voice_membrane.vocab.events import Block, Chunk
from voice_membrane.vocab.messages import Message, ModelConfig, Request, ToolDefinition
from voice_membrane.vocab.provider_output import (
    NativeStart,
    NativeStop,
    StopInfo,
    TextDelta,
    clean_output,
)

pytestmark = pytest.mark.anyio
WEATHER = tool_handler({"get_weather": lambda city: f"Sunny in {city}"})
WEATHER_TOOLS = [ToolDefinition(name="get_weather", input_schema={"type": "object"})]


def make_request(model: str, tools: list[ToolDefinition] | None = None) -> Request:
    return Request(
        messages=[Message(participant="User", content="Hi")],
        config=ModelConfig(model=model, max_tokens=200),
        tools=tools or [],
    )


async def collect(membrane: Membrane, request: Request, **kw: Any) -> list[MembraneItem]:
    return [item async for item in membrane.stream(request, **kw)]


def visible(items: list[MembraneItem]) -> str:
    return "".join(i.text for i in items if isinstance(i, Chunk) and i.meta.visible)


def hidden(items: list[MembraneItem]) -> str:
    return "".join(i.text for i in items if isinstance(i, Chunk) and not i.meta.visible)


def result_of(items: list[MembraneItem]) -> ReplyResult:
    assert isinstance(items[-1], ReplyResult)
    return items[-1]


# ------------------------------------------------------------------ through each SDK


def anthropic_delta(kind: str, field: str, value: Any) -> RawEvent:
    data = {"type": "content_block_delta", "index": 1, "delta": {"type": kind, field: value}}
    return RawEvent(data, 0, "content_block_delta")


async def test_anthropic_unknown_events_mistyped_fields_and_stray_deltas() -> None:
    reply = ScriptedReply.of(
        thinking("Plan."),
        "Hello there.",
        delta_chars=6,
        raw=(
            RawEvent({"type": "brand_new_event", "x": 1}, 1, "brand_new_event"),
            # Inside the text block (deltas 2-3): a mistyped text, a thinking
            # delta that does not belong there, half an emoji.
            *(
                RawEvent(e.data, 2, e.event)
                for e in (
                    anthropic_delta("text_delta", "text", 42),
                    anthropic_delta("thinking_delta", "thinking", "SECRET"),
                    anthropic_delta("text_delta", "text", " \ud83d"),
                    anthropic_delta("mystery_delta", "text", "SECRET2"),
                )
            ),
            # A block of a type the reader does not know, after the text.
            RawEvent(
                {"type": "content_block_start", "index": 2, "content_block": {"type": "new"}},
                9,
                "content_block_start",
            ),
            RawEvent(
                anthropic_delta("text_delta", "text", "SECRET3").data, 9, "content_block_delta"
            ),
            RawEvent({"type": "content_block_stop", "index": 2}, 9, "content_block_stop"),
        ),
    )
    with FakeAnthropic(reply) as fake:
        provider = AnthropicProvider(api_key="k", base_url=fake.base_url)
        items = await collect(Membrane(provider, "native", retry=NO_RETRY), make_request("c"))
        await provider.aclose()
    result = result_of(items)
    assert result.error is None and result.stop_reason == "end_turn"
    assert visible(items) == "Hello  \ufffdthere."
    # The stray text is kept as hidden blocks; an unknown delta type is skipped.
    stray = [b.content for b in result.blocks if b.type == "tool_call"]
    assert stray == ["SECRET", "SECRET3"] and "SECRET2" not in hidden(items)
    assert result.blocks[0] == Block("thinking", "Plan.", signature="sig-fake")


async def test_openai_unknown_chunks_and_mistyped_fields() -> None:
    head = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def chunk(delta: Any) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}

    reply = ScriptedReply.of(
        thinking("Plan."),
        "Hello there.",
        delta_chars=6,
        raw=(
            RawEvent({"object": "brand.new.object", "whatever": [1]}, 1, "brand_new"),
            RawEvent(chunk({"content": 42}), 2),
            RawEvent(chunk("not an object"), 2),
            RawEvent({**head, "choices": {"0": "not a list"}}, 2),
            RawEvent(chunk({"content": " \ud83d"}), 2),
            RawEvent(chunk({"tool_calls": [{"index": "0", "function": 7}]}), 3),
        ),
    )
    with FakeOpenAI(reply) as fake:
        provider = OpenAIProvider(api_key="k", base_url=fake.base_url)
        items = await collect(Membrane(provider, "native", retry=NO_RETRY), make_request("g"))
        await provider.aclose()
    result = result_of(items)
    assert result.error is None
    assert visible(items) == "Hello  \ufffdthere."
    assert [b.type for b in result.blocks][:2] == ["thinking", "text"]


async def test_gemini_unknown_parts_and_fields_are_skipped_a_mistyped_one_ends_the_reply() -> None:
    def chunk(part: Any, **extra: Any) -> dict[str, Any]:
        return {"candidates": [{"content": {"parts": [part], "role": "model"}}], **extra}

    reply = ScriptedReply.of(
        thinking("Plan."),
        "Hello there.",
        delta_chars=6,
        raw=(
            RawEvent(chunk({"text": " \ud83d"}, brandNewField={"x": 1}), 2),
            RawEvent(chunk({"brandNewPart": {"x": 1}}), 2),
            RawEvent(chunk({"executableCode": {"code": "SECRET", "language": "PYTHON"}}), 2),
            # The SDK validates each chunk: one that does not fit its schema
            # cannot be read past, so the reply ends there, keeping what came.
            RawEvent(chunk({"text": 42}), 3),
        ),
    )
    with FakeGemini(reply) as fake:
        provider = GeminiProvider(api_key="k", base_url=fake.base_url)
        items = await collect(Membrane(provider, "native", retry=NO_RETRY), make_request("g"))
        await provider.aclose()
    errors = [i for i in items if isinstance(i, ReplyError)]
    assert len(errors) == 1 and errors[0].kind == "stream" and errors[0].after_output
    assert visible(items) == "Hello  \ufffd"
    assert "SECRET" not in visible(items)
    assert result_of(items).blocks[0].content == "Plan."


@pytest.mark.parametrize(
    ("fake", "adapter"),
    [
        (FakeAnthropic, AnthropicProvider),
        (FakeOpenAI, OpenAIProvider),
        (FakeGemini, GeminiProvider),
    ],
    ids=["anthropic", "openai", "gemini"],
)
async def test_bytes_that_are_not_utf8_end_the_reply_with_a_stream_error(
    fake: Any, adapter: Any
) -> None:
    reply = ScriptedReply.of(
        "Hello there.", delta_chars=6, raw=(RawEvent(b"data: \xff\xfe\n\n", 1),)
    )
    with fake(reply) as server:
        provider = adapter(api_key="k", base_url=server.base_url)
        items = await collect(Membrane(provider, "native", retry=NO_RETRY), make_request("m"))
        await provider.aclose()
    errors = [i for i in items if isinstance(i, ReplyError)]
    assert [e.kind for e in errors] == ["stream"]
    assert visible(items) == "Hello "


# ------------------------------------------------------------------ tool calls


def tool_use_events(tool_id: str, name: str, after: int) -> list[RawEvent]:
    start = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
    delta = {"type": "input_json_delta", "partial_json": '{"city": "Paris"}'}
    return [
        RawEvent(
            {"type": "content_block_start", "index": 1, "content_block": start},
            after,
            "content_block_start",
        ),
        RawEvent(
            {"type": "content_block_delta", "index": 1, "delta": delta},
            after,
            "content_block_delta",
        ),
        RawEvent({"type": "content_block_stop", "index": 1}, after, "content_block_stop"),
    ]


async def test_tool_calls_with_no_id_or_no_name_do_not_crash_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = ScriptedReply.of(
        "Checking.",
        stop_reason="tool_use",
        raw=(*tool_use_events("", "get_weather", 9), *tool_use_events("toolu_9", "", 9)),
    )
    second = ScriptedReply.of("Sunny.")
    with FakeAnthropic(first, second) as fake:
        provider = AnthropicProvider(api_key="k", base_url=fake.base_url)
        with caplog.at_level(logging.WARNING):
            items = await collect(
                Membrane(provider, "native", retry=NO_RETRY),
                make_request("c", WEATHER_TOOLS),
                on_tool_calls=WEATHER,
            )
        await provider.aclose()
        sent = fake.requests[1].body
    result = result_of(items)
    assert result.error is None and result.tool_rounds == 1
    assert visible(items) == "Checking.Sunny."
    # The call with no id ran under a generated one; the call with no name did not run.
    results = [b for b in result.blocks if b.type == "tool_result"]
    assert [(b.tool_id, b.content) for b in results] == [("toolu_gen_1", "Sunny in Paris")]
    assistant = sent["messages"][1]["content"]
    assert [c["type"] for c in assistant] == ["text", "tool_use"]  # no nameless call sent
    assert assistant[1]["id"] == "toolu_gen_1"
    assert "no name not run" in caplog.text and "without an id" in caplog.text
    assert all(m.content for m in result.messages)


def test_runnable_calls_and_history_skip_calls_with_no_name_or_id() -> None:
    blocks = [
        Block("tool_call", None, "c1", "f", {"a": 1}),
        Block("tool_call", None, "c2", "", {}),
        Block("tool_call", None, "", "g", {}),
        Block("tool_call", "stray text", None, None, {}),
    ]
    assert [(c.id, c.name) for c in runnable_calls(blocks)] == [("c1", "f")]
    (message,) = conversation(blocks, "Assistant", "User")
    assert len(message.content) == 1


async def test_a_nameless_xml_invoke_is_not_run() -> None:
    wire = 'Ok.<function_calls><invoke name=""><parameter name="a">1</parameter></invoke>'
    reply = ScriptedReply.of(wire, stop_reason="stop_sequence", stop_sequence="</function_calls>")
    ran: list[Any] = []

    async def handler(calls: list[Any]) -> list[str]:
        ran.extend(calls)
        return ["x"] * len(calls)

    with FakeAnthropic(reply) as fake:
        provider = AnthropicProvider(api_key="k", base_url=fake.base_url)
        items = await collect(
            Membrane(provider, "anthropic-xml", retry=NO_RETRY),
            make_request("c"),
            on_tool_calls=WEATHER,
        )
        await provider.aclose()
    assert ran == [] and result_of(items).error is None and visible(items) == "Ok."


# ------------------------------------------------------------------ lone surrogates


def test_provider_output_is_cleaned_of_lone_surrogates() -> None:
    assert clean_output(TextDelta("a\ud83db")) == TextDelta("a\ufffdb")
    start = NativeStart("tool_call", "id\udc00", "f\ud800")
    assert clean_output(start) == NativeStart("tool_call", "id\ufffd", "f\ufffd")
    stop = NativeStop(input={"k\ud83d": ["v\ud83d", 1]})
    assert clean_output(stop) == NativeStop(input={"k\ufffd": ["v\ufffd", 1]})
    well_formed = TextDelta("a 😀 é")
    assert clean_output(well_formed) is well_formed
    assert clean_output(StopInfo("end_turn", raw="x")) == StopInfo("end_turn", raw="x")


def test_the_event_log_and_the_console_take_lone_surrogates(tmp_path: Path) -> None:
    log = JsonlEventLog(tmp_path / "events.jsonl")
    log({"event": "chunk", "text": "half \ud83d emoji"})
    log.close()
    line = json.loads((tmp_path / "events.jsonl").read_text(encoding="utf-8"))
    assert line["text"] == "half \ufffd emoji"
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")  # strict, as a UTF-8 console is
    block = {"type": "thinking", "content": "hmm \ud83d", "tool_name": None}
    HiddenBlockPrinter(out)({"event": "block_complete", "block": block})
    out.flush()
    assert "hmm \ufffd" in raw.getvalue().decode()


async def test_the_demo_replays_a_recording_with_a_lone_surrogate(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    header = {"format": "voice-membrane-replay", "version": 1, "description": "d \\ud83d"}
    lines = [json.dumps(header), '{"t_ms": 0, "text": "Hi \\ud83d there. "}']
    path.write_text("\n".join(lines).replace("\\\\ud83d", "\\ud83d"), encoding="utf-8")
    recording = load_recording(path)
    assert recording.text == "Hi \ufffd there. "
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    await run_demo(recording, speed=0, out=out)
    out.flush()
    assert "Hi \ufffd there." in raw.getvalue().decode()


def test_espeak_input_drops_what_cannot_be_spoken() -> None:
    # U+FFFD too: espeak-ng reads it aloud as garbage.
    assert _text_lines("Half \ud83d an emoji, lost \ufffd text.") == ["Half an emoji, lost text."]


async def test_espeak_speaks_text_with_a_lone_surrogate() -> None:
    engine = EspeakEngine()
    await engine.start()
    try:
        async with aclosing(engine.synthesize("Hello \ud83d world.")) as chunks:
            audio = [chunk async for chunk in chunks]
    finally:
        await engine.aclose()
    assert sum(len(c.samples) for c in audio) > 0


async def test_stray_text_in_prefill_mode_does_not_turn_xml_calls_into_native_ones() -> None:
    # Stray text is kept as a nameless tool_call block; it must not be taken for
    # a native call, or the XML call's result would go back as a native one.
    wire = 'Ok.<function_calls><invoke name="get_weather"><parameter name="city">Paris'
    stray = {"type": "input_json_delta", "partial_json": '{"x": 1}'}
    first = ScriptedReply.of(
        thinking("Hmm."),
        wire + "</parameter></invoke>",
        stop_reason="stop_sequence",
        stop_sequence="</function_calls>",
        raw=(
            RawEvent(
                {"type": "content_block_delta", "index": 0, "delta": stray},
                0,
                "content_block_delta",
            ),
        ),
    )
    with FakeAnthropic(first, ScriptedReply.of("Sunny.")) as fake:
        provider = AnthropicProvider(api_key="k", base_url=fake.base_url)
        items = await collect(
            Membrane(provider, "anthropic-xml", retry=NO_RETRY),
            make_request("c"),
            on_tool_calls=WEATHER,
        )
        await provider.aclose()
        resumed = fake.requests[1].body["messages"][-1]
    assert result_of(items).tool_rounds == 1 and visible(items) == "Ok.Sunny."
    assert resumed["role"] == "assistant" and "<function_results>" in str(resumed["content"])


async def test_unsigned_reasoning_before_a_tool_call_does_not_stop_the_tool_loop() -> None:
    # OpenAI-compatible reasoning comes unsigned: it cannot go back as thinking,
    # so the continuation leaves it out instead of failing mid-reply.
    first = ScriptedReply.of(
        thinking("Need the weather."), tool_use("get_weather", {"city": "Paris"}, id="c1")
    )
    with FakeOpenAI(first, ScriptedReply.of("Sunny.")) as fake:
        provider = OpenAIProvider(api_key="k", base_url=fake.base_url)
        items = await collect(
            Membrane(provider, "native", retry=NO_RETRY),
            make_request("g", WEATHER_TOOLS),
            on_tool_calls=WEATHER,
        )
        await provider.aclose()
        sent = fake.requests[1].body
    result = result_of(items)
    assert result.error is None and result.tool_rounds == 1 and visible(items) == "Sunny."
    assert "Need the weather." not in json.dumps(sent)
    assert result.blocks[0] == Block("thinking", "Need the weather.")  # kept in the reply

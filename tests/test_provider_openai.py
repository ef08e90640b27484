"""OpenAIProvider against FakeOpenAI: output items (native blocks, usage, stop
reasons), request mapping, legacy Completions with client-side stops, errors,
and cancellation."""

from __future__ import annotations

import time
from typing import Any, Literal

import anyio
import pytest
from native_events import assemble, blocks

from voice_membrane.formats.base import BuiltRequest, ProviderMessage
from voice_membrane.providers.openai import OpenAIProvider
from voice_membrane.providers.openai_request import token_field
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import Fault, ScriptedReply, text, thinking, tool_use
from voice_membrane.vendors.errors import ProviderError
from voice_membrane.vendors.openai_client import stream_error_kind
from voice_membrane.vocab.events import merge_adjacent_chunks
from voice_membrane.vocab.messages import (
    Base64Source,
    ImageContent,
    ModelConfig,
    TextContent,
    ThinkingContent,
    ToolDefinition,
    ToolResultContent,
    ToolUseContent,
    UrlSource,
)
from voice_membrane.vocab.provider_output import (
    NativeDelta,
    ProviderOutput,
    StopInfo,
    TextDelta,
    Usage,
)

pytestmark = pytest.mark.anyio
CONFIG = ModelConfig(model="gpt-test", max_tokens=300, temperature=0.3)
HELLO = [ProviderMessage("user", [TextContent(text="Weather in Paris and Rome?")])]
CHAT = BuiltRequest("chat", HELLO, system="Be brief.")
REPLY_BLOCKS = (
    thinking("Paris first, then Rome."),
    text("Checking both."),
    tool_use("get_weather", {"city": "Paris", "days": 2}, id="call_a"),
    tool_use("get_weather", {"city": "Rome", "days": 1}, id="call_b"),
)


async def run(
    server: FakeOpenAI, built: BuiltRequest = CHAT, *, streaming: bool = True, **kw: Any
) -> list[ProviderOutput]:
    provider = OpenAIProvider(api_key="fake-key", base_url=server.base_url, **kw)
    try:
        return [item async for item in provider.stream(built, CONFIG, streaming=streaming)]
    finally:
        await provider.aclose()


async def failing(
    server: FakeOpenAI, built: BuiltRequest = CHAT
) -> tuple[list[Any], ProviderError]:
    """The items yielded before the error, and the error."""
    provider = OpenAIProvider(api_key="fake-key", base_url=server.base_url)
    got: list[ProviderOutput] = []
    with pytest.raises(ProviderError) as caught:
        async for item in provider.stream(built, CONFIG):
            got.append(item)
    await provider.aclose()
    return got, caught.value


def last_stop(items: list[ProviderOutput]) -> StopInfo:
    assert isinstance(items[-1], StopInfo)
    return items[-1]


# ------------------------------------------------------------------ chat output


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_text_and_two_tool_calls(field: Any) -> None:
    with FakeOpenAI(ScriptedReply.of(*REPLY_BLOCKS, delta_chars=3), reasoning_field=field) as fake:
        items = await run(fake)
    got = blocks(items)
    assert [b.type for b in got] == ["thinking", "text", "tool_call", "tool_call"]
    assert got[0].content == "Paris first, then Rome."
    assert got[1].content == "Checking both."
    assert [(b.tool_id, b.tool_name, b.input) for b in got[2:]] == [
        ("call_a", "get_weather", {"city": "Paris", "days": 2}),
        ("call_b", "get_weather", {"city": "Rome", "days": 1}),
    ]
    fragments = [i.text for i in items if isinstance(i, NativeDelta) and "{" in i.text]
    assert fragments and all(len(f) <= 3 for f in fragments)  # arguments arrive split
    usage = [i for i in items if isinstance(i, Usage)]
    assert usage == [
        Usage(input_tokens=12, output_tokens=usage[0].output_tokens, thinking_tokens=8)
    ]
    assert last_stop(items) == StopInfo("tool_use", raw="tool_calls")


async def test_non_streaming_gives_the_same_blocks() -> None:
    reply = ScriptedReply.of(*REPLY_BLOCKS, delta_chars=4)
    with FakeOpenAI(reply, reply) as fake:
        streamed = await run(fake)
        whole = await run(fake, streaming=False)
    assert merge_adjacent_chunks(assemble(whole)) == merge_adjacent_chunks(assemble(streamed))
    assert fake.requests[1].body.get("stream") is None
    assert isinstance(whole[-2], Usage) and last_stop(whole) == last_stop(streamed)


@pytest.mark.parametrize(
    ("stop", "reason", "raw"),
    [("end_turn", "end_turn", "stop"), ("max_tokens", "max_tokens", "length")],
)
async def test_finish_reason_mapping(stop: Any, reason: str, raw: str) -> None:
    with FakeOpenAI(ScriptedReply.of("Hi there.", stop_reason=stop)) as fake:
        items = await run(fake)
    assert last_stop(items) == StopInfo(reason, raw=raw)  # type: ignore[arg-type]
    assert [b.content for b in blocks(items)] == ["Hi there."]


async def test_fifth_stop_sequence_is_enforced_client_side() -> None:
    stops = ["<a>", "<b>", "<c>", "<d>", "END"]
    built = BuiltRequest("chat", HELLO, stop_sequences=stops)
    with FakeOpenAI(ScriptedReply.of("One two. ENDING here.", delta_chars=3)) as fake:
        items = await run(fake, built)
    assert fake.requests[0].body["stop"] == stops[:4]
    assert [b.content for b in blocks(items)] == ["One two. "]
    assert last_stop(items) == StopInfo("stop_sequence", stop_sequence="END")
    assert not any(isinstance(i, Usage) for i in items)  # reading stopped at the match


# ------------------------------------------------------------------ request mapping


WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather by city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def rich_request(mode: Literal["chat", "prefill"] = "chat") -> BuiltRequest:
    """Text, images, thinking, a tool call and its result, tools, stops, params."""
    png = ImageContent(source=Base64Source(media_type="image/png", data="iVBORw0K"))
    messages = [
        ProviderMessage(
            "user",
            [
                TextContent(text="What is this? "),
                png,
                ImageContent(source=UrlSource(url="https://example.com/a.jpg")),
            ],
        ),
        ProviderMessage(
            "assistant",
            [
                ThinkingContent(thinking="hidden", signature="sig"),
                TextContent(text="Checking."),
                ToolUseContent(id="call_1", name="get_weather", input={"city": "Paris"}),
            ],
        ),
        ProviderMessage(
            "user",
            [
                ToolResultContent(tool_use_id="call_1", content="Sunny"),
                TextContent(text="And now?"),
            ],
        ),
    ]
    return BuiltRequest(
        mode,
        messages if mode == "chat" else [],
        system="Be brief.",
        prompt=None if mode == "chat" else "User: Hi\n\nBob:",
        tools=[WEATHER],
        stop_sequences=["\n\nUser:"],
        params={"seed": 7, "reasoning_effort": "low"},
    )


async def test_request_mapping() -> None:
    with FakeOpenAI(ScriptedReply.of("Done.")) as fake:
        await run(fake, rich_request())
    body = fake.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this? "},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
        {"role": "user", "content": "And now?"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather by city.",
                "parameters": WEATHER.input_schema,
            },
        }
    ]
    assert body["model"] == "gpt-test" and body["temperature"] == 0.3
    assert body["max_tokens"] == 300 and "max_completion_tokens" not in body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["stop"] == ["\n\nUser:"]
    assert body["seed"] == 7 and body["reasoning_effort"] == "low"


@pytest.mark.parametrize("mode", ["chat", "prefill"])
@pytest.mark.parametrize("streaming", [True, False])
async def test_body_on_the_wire_is_what_the_sdk_create_sends(mode: str, streaming: bool) -> None:
    """The body is posted as built, skipping ``create``'s parameter transform:
    what the server receives is the same either way."""
    built = rich_request(mode)  # type: ignore[arg-type]
    with FakeOpenAI(ScriptedReply.of("Done."), ScriptedReply.of("Done.")) as fake:
        await run(fake, built, streaming=streaming)
        provider = OpenAIProvider(api_key="fake-key", base_url=fake.base_url)
        body = provider.request_body(built, CONFIG, streaming=streaming)
        extra = {key: body.pop(key) for key in built.params}
        calls: Any = provider.client().chat if mode == "chat" else provider.client()
        try:
            answer = await calls.completions.create(**body, extra_body=extra)
            if streaming:
                _ = [part async for part in answer]
        finally:
            await provider.aclose()
    ours, sdks = (request.body for request in fake.requests)
    assert ours == sdks


async def test_max_tokens_field() -> None:
    assert token_field("https://api.openai.com/v1") == "max_completion_tokens"
    assert token_field("http://localhost:8000/v1") == "max_tokens"
    with FakeOpenAI(ScriptedReply.of("Hi.")) as fake:
        await run(fake, max_tokens_field="max_completion_tokens")
    assert fake.requests[0].body["max_completion_tokens"] == 300
    assert "max_tokens" not in fake.requests[0].body


# ------------------------------------------------------------------ legacy completions


def prefill(**kw: Any) -> BuiltRequest:
    return BuiltRequest("prefill", [], prompt="User: Hi\n\nBob:", **kw)


async def test_legacy_leaked_stop_is_truncated() -> None:
    reply = ScriptedReply.of(" Hello there.", stop_reason="stop_sequence", delta_chars=3)
    with FakeOpenAI(reply, leak_stop=True) as fake:
        items = await run(fake, prefill(stop_sequences=["\n\nUser:"]))
    body = fake.requests[0].body
    assert fake.requests[0].path == "/v1/completions"
    assert body["prompt"] == "User: Hi\n\nBob:" and body["stop"] == ["\n\nUser:"]
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == " Hello there."
    assert last_stop(items) == StopInfo("stop_sequence", stop_sequence="\n\nUser:")
    assert not any(isinstance(i, Usage) for i in items)  # reading stopped at the match


async def test_legacy_stop_named_by_the_server_and_plain_end() -> None:
    named = ScriptedReply.of(" Hi.", stop_reason="stop_sequence")
    with FakeOpenAI(named, ScriptedReply.of(" Hi."), stop_field="stopping_word") as fake:
        first = await run(fake, prefill(stop_sequences=["\nUser:", "\nBob:"]))
        plain = await run(fake, prefill(stop_sequences=["\nUser:"]), streaming=False)
    assert last_stop(first) == StopInfo("stop_sequence", stop_sequence="\nUser:", raw="stop")
    assert last_stop(plain) == StopInfo("end_turn", raw="stop")
    assert [i for i in plain if isinstance(i, TextDelta)] == [TextDelta(" Hi.")]


async def test_legacy_end_of_turn_is_stripped() -> None:
    built = BuiltRequest("prefill", [], prefill="Bob:", end_of_turn="<|eot|>")
    with FakeOpenAI(ScriptedReply.of(" Bye now.<|eot|> extra", delta_chars=4)) as fake:
        items = await run(fake, built)
    assert fake.requests[0].body["prompt"] == "Bob:"
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == " Bye now."
    assert last_stop(items).reason == "end_turn"


# ------------------------------------------------------------------ errors


async def test_rate_limit_is_one_request_with_retry_after() -> None:
    with FakeOpenAI(ScriptedReply.http_error(429, retry_after=1.5, message="slow down")) as fake:
        got, error = await failing(fake)
    assert got == [] and len(fake.requests) == 1  # the SDK's own retries are off
    assert (error.kind, error.status, error.retry_after_s) == ("rate_limit", 429, 1.5)
    assert error.detail == "slow down" and error.retryable


async def test_mid_stream_error_after_three_deltas() -> None:
    fault = Fault("error_event", after_deltas=3, status=500, message="boom")
    with FakeOpenAI(ScriptedReply.of("abcdefghij", delta_chars=2, fault=fault)) as fake:
        got, error = await failing(fake)
    assert [i.text for i in got if isinstance(i, NativeDelta)] == ["ab", "cd", "ef"]
    assert (error.kind, error.detail) == ("server", "boom")


async def test_malformed_line_and_dropped_connection() -> None:
    malformed = ScriptedReply.of("abcdef", delta_chars=2, fault=Fault("malformed", after_deltas=1))
    drop = ScriptedReply.of("abcdef", delta_chars=2, fault=Fault("drop", after_deltas=2))
    with FakeOpenAI(malformed, drop) as fake:
        got, error = await failing(fake)
        assert error.kind == "stream" and "not JSON" in error.detail
        assert [i.text for i in got if isinstance(i, NativeDelta)] == ["ab"]
        got, error = await failing(fake)
        assert error.kind == "connection" and error.retryable
        assert [i.text for i in got if isinstance(i, NativeDelta)] == ["ab", "cd"]


@pytest.mark.parametrize(
    ("fault", "kind"),
    [(Fault("malformed"), "stream"), (Fault("drop"), "connection")],
    ids=["malformed", "drop"],
)
async def test_non_streaming_faults(fault: Fault, kind: str) -> None:
    with (
        FakeOpenAI(ScriptedReply.of("Hello.", fault=fault)) as fake,
        pytest.raises(ProviderError) as caught,
    ):
        await run(fake, streaming=False)
    assert caught.value.kind == kind


async def test_timeout_and_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI(ScriptedReply.of("late", ttft_s=2.0)) as fake:
        with pytest.raises(ProviderError) as caught:
            await run(fake, timeout_s=0.2)
        assert caught.value.kind == "timeout"
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        provider = OpenAIProvider(base_url=fake.base_url)
        with pytest.raises(ProviderError, match="OPENAI_API_KEY") as caught:
            await anext(provider.stream(CHAT, CONFIG))
        assert caught.value.kind == "auth"


def test_in_stream_error_kinds() -> None:
    assert stream_error_kind({"code": 502, "message": "x"}) == "server"
    assert stream_error_kind({"code": "429"}) == "rate_limit"
    assert stream_error_kind({"type": "tokens", "code": "rate_limit_exceeded"}) == "rate_limit"
    assert stream_error_kind({"type": "server_error", "code": None}) == "server"
    assert stream_error_kind({"type": "invalid_request_error", "code": "bad"}) == "stream"


# ------------------------------------------------------------------ cancellation


async def test_closing_the_generator_closes_the_stream() -> None:
    reply = ScriptedReply.of("word " * 200, delta_chars=5, delta_delay_s=0.01)
    with FakeOpenAI(reply) as fake:
        provider = OpenAIProvider(api_key="fake-key", base_url=fake.base_url)
        stream = provider.stream(CHAT, CONFIG)
        async for item in stream:
            if isinstance(item, NativeDelta):
                break
        await stream.aclose()
        deadline = time.monotonic() + 3
        while fake.cancelled_streams == 0 and time.monotonic() < deadline:
            await anyio.sleep(0.02)
        await provider.aclose()
    assert fake.cancelled_streams == 1


@pytest.mark.parametrize(
    ("budget", "params", "effort"),
    [
        (1024, {}, "low"),
        (8000, {}, "medium"),
        (32000, {}, "high"),
        (32000, {"reasoning_effort": "minimal"}, "minimal"),
    ],
)
async def test_thinking_budget_becomes_reasoning_effort(
    budget: int, params: dict[str, Any], effort: str
) -> None:
    config = ModelConfig(model="gpt-test", max_tokens=64000, thinking_budget=budget)
    built = BuiltRequest("chat", HELLO, params=params)
    with FakeOpenAI(ScriptedReply.of("Hi.")) as fake:
        provider = OpenAIProvider(api_key="fake-key", base_url=fake.base_url)
        try:
            _ = [item async for item in provider.stream(built, config)]
        finally:
            await provider.aclose()
    assert fake.requests[0].body["reasoning_effort"] == effort  # provider_params win


async def test_no_thinking_budget_sends_no_reasoning_effort() -> None:
    with FakeOpenAI(ScriptedReply.of("Hi.")) as fake:
        await run(fake)
    assert "reasoning_effort" not in fake.requests[0].body

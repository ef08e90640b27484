"""Membrane against the fake servers: the tool loop in both modes, stop-sequence
false positives, retries and errors (nothing received is lost), validation
before any network call, cancellation."""

from __future__ import annotations

import socket
import time
from typing import Any

import anyio
import pytest
from vendors import VENDORS, Vendor

from voice_membrane.formats import get_formatter
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.membrane.reply import MembraneItem, ReplyError, ReplyResult, Retrying
from voice_membrane.membrane.tools import tool_handler
from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.script import Fault, ScriptedReply, text, thinking, tool_use
from voice_membrane.vendors.retry import RetryPolicy
from voice_membrane.vocab.events import BlockComplete, Chunk
from voice_membrane.vocab.messages import (
    Message,
    ModelConfig,
    Request,
    RequestError,
    RequestOptions,
    ThinkingContent,
    ToolDefinition,
    validate_request,
)

pytestmark = pytest.mark.anyio
FAST_RETRY = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.5)
TOOLS = [
    ToolDefinition(name=name, input_schema={"type": "object", "properties": {}})
    for name in ("get_weather", "slow", "boom")
]


def make_request(model: str = "claude-test", **options: Any) -> Request:
    return Request(
        messages=[Message(participant="User", content="Weather in Paris?")],
        config=ModelConfig(model=model, max_tokens=500),
        tools=TOOLS,
        options=RequestOptions(assistant_participant="Claude", **options),
    )


async def collect(membrane: Membrane, request: Request, **kw: Any) -> list[MembraneItem]:
    return [item async for item in membrane.stream(request, **kw)]


def result_of(items: list[MembraneItem]) -> ReplyResult:
    assert isinstance(items[-1], ReplyResult)
    return items[-1]


def visible(items: list[MembraneItem]) -> str:
    return "".join(i.text for i in items if isinstance(i, Chunk) and i.meta.visible)


def slow_tool() -> str:
    time.sleep(2)
    return "too late"


def boom() -> str:
    raise RuntimeError("backend down")


HANDLER = tool_handler(
    {"get_weather": lambda city: f"Sunny in {city}, 21 °C", "slow": slow_tool, "boom": boom},
    timeout_s=0.2,
)


# ------------------------------------------------------------------ tool loop


@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
async def test_chat_tool_loop_with_a_timeout_and_a_failure(vendor: Vendor) -> None:
    first = ScriptedReply.of(
        text("Let me check."),
        tool_use("get_weather", {"city": "Paris"}, id="call_w"),
        tool_use("slow", {}, id="call_s"),
        tool_use("boom", {}, id="call_b"),
    )
    second = ScriptedReply.of("It is sunny in Paris.")
    with vendor.server(first, second) as server:
        provider = vendor.provider(server)
        items = await collect(
            Membrane(provider, "native"), make_request(vendor.model), on_tool_calls=HANDLER
        )
        await provider.aclose()
        bodies = [r.body for r in server.requests]
    result = result_of(items)
    assert result.error is None and result.tool_rounds == 1
    assert visible(items) == "Let me check.It is sunny in Paris."
    results = [b for b in result.blocks if b.type == "tool_result"]
    assert [(b.tool_name, b.is_error) for b in results] == [
        ("get_weather", False),
        ("slow", True),
        ("boom", True),
    ]
    assert results[0].content == "Sunny in Paris, 21 °C"
    assert results[1].content is not None and "timed out" in results[1].content
    assert results[2].content is not None and "backend down" in results[2].content
    # Result chunks are hidden and carry the call's id.
    result_chunks = [i for i in items if isinstance(i, Chunk) and i.meta.type == "tool_result"]
    assert result_chunks and not any(c.meta.visible for c in result_chunks)
    assert len(bodies) == 2
    second_body = str(bodies[1])
    assert "Sunny in Paris, 21 °C" in second_body and "backend down" in second_body
    # The history for the next turn: assistant turn, results, final answer.
    assert [m.participant for m in result.messages] == ["Claude", "User", "Claude"]


async def test_prefill_tool_loop_appends_results_and_resumes_the_turn() -> None:
    first = ScriptedReply.of(
        'Let me check.\n<function_calls>\n<invoke name="get_weather">'
        '<parameter name="city">Paris</parameter></invoke>\n'
        '<invoke name="slow"></invoke>\n<invoke name="boom"></invoke>\n',
        stop_reason="stop_sequence",
        stop_sequence="</function_calls>",
        delta_chars=6,
    )
    second = ScriptedReply.of("\nIt is sunny in Paris.")
    with FakeAnthropic(first, second) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        items = await collect(
            Membrane(provider, "anthropic-xml"), make_request(), on_tool_calls=HANDLER
        )
        await provider.aclose()
        bodies = [r.body for r in server.requests]
    result = result_of(items)
    assert result.error is None and result.tool_rounds == 1
    types = [b.type for b in result.blocks]
    assert types == ["text", *["tool_call"] * 3, *["tool_result"] * 3, "text"]
    results = result.blocks[4:7]
    assert [(b.tool_name, b.is_error) for b in results] == [
        ("get_weather", False),
        ("slow", True),
        ("boom", True),
    ]
    assert results[0].content == "Sunny in Paris, 21 °C"
    assert "timed out" in (results[1].content or "")
    assert "backend down" in (results[2].content or "")
    assert visible(items) == "Let me check.\n\nIt is sunny in Paris."
    # The second call continues the same assistant turn: call, stop text, results.
    prefill_1 = bodies[0]["messages"][-1]["content"]
    prefill_2 = bodies[1]["messages"][-1]["content"]
    prefill_1 = prefill_1 if isinstance(prefill_1, str) else prefill_1[-1]["text"]
    prefill_2 = prefill_2 if isinstance(prefill_2, str) else prefill_2[-1]["text"]
    assert prefill_2.startswith(prefill_1)
    assert "</invoke>\n</function_calls><function_results>" in prefill_2
    assert "Sunny in Paris, 21 °C</result>" in prefill_2
    assert "<error tool_use_id=" in prefill_2 and "backend down" in prefill_2
    # The reply as history: calls, results, answer; a follow-up request takes it.
    assert [m.participant for m in result.messages] == ["Claude", "User", "Claude"]
    follow_up = make_request().model_copy(
        update={"messages": [*make_request().messages, *result.messages]}
    )
    validate_request(follow_up)
    transcript = get_formatter("anthropic-xml").build(follow_up).prefill or ""
    assert '<invoke name="slow">' in transcript and "backend down" in transcript


async def test_tool_depth_is_bounded() -> None:
    loop = [ScriptedReply.of(tool_use("get_weather", {"city": "Paris"})) for _ in range(3)]
    with FakeAnthropic(*loop) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        membrane = Membrane(provider, "native", max_tool_depth=2)
        result = result_of(await collect(membrane, make_request(), on_tool_calls=HANDLER))
        await provider.aclose()
        assert len(server.requests) == 3
    assert result.tool_rounds == 2 and result.stop_reason == "tool_use"


async def test_a_false_stop_inside_thinking_is_resumed() -> None:
    first = ScriptedReply.of(
        "<thinking>They said", stop_reason="stop_sequence", stop_sequence="\nUser:"
    )
    second = ScriptedReply.of(" hi.</thinking>Hello!")
    with FakeAnthropic(first, second) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        result = result_of(await collect(Membrane(provider, "anthropic-xml"), make_request()))
        await provider.aclose()
        assert len(server.requests) == 2
    assert [(b.type, b.content) for b in result.blocks] == [
        ("thinking", "They said\nUser: hi."),
        ("text", "Hello!"),
    ]


async def test_a_resume_without_progress_ends_the_reply() -> None:
    stuck = {"stop_reason": "stop_sequence", "stop_sequence": "\nUser:"}
    first = ScriptedReply.of("<thinking>They said", **stuck)
    second = ScriptedReply.of(**stuck)  # nothing new: must not loop
    with FakeAnthropic(first, second, ScriptedReply.of("never asked")) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        result = result_of(await collect(Membrane(provider, "anthropic-xml"), make_request()))
        await provider.aclose()
        assert len(server.requests) == 2
    assert [b.type for b in result.blocks] == ["thinking"] and result.text == ""


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
async def test_429_then_success_is_retried_honouring_retry_after(vendor: Vendor) -> None:
    replies = [ScriptedReply.http_error(429, retry_after=0.05), ScriptedReply.of("Hello there.")]
    with vendor.server(*replies) as server:
        provider = vendor.provider(server)
        items = await collect(Membrane(provider, retry=FAST_RETRY), make_request(vendor.model))
        await provider.aclose()
        assert len(server.requests) == 2
    retries = [i for i in items if isinstance(i, Retrying)]
    assert len(retries) == 1 and retries[0].delay_s == 0.05
    assert visible(items) == "Hello there." and result_of(items).error is None


@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault("error_event", after_deltas=5, status=500), ("server", "overloaded", "stream")),
        (Fault("malformed", after_deltas=5), ("stream",)),
        (Fault("drop", after_deltas=5), ("connection",)),
    ],
    ids=["error-event", "malformed", "dropped"],
)
async def test_an_error_after_output_ends_the_reply_and_keeps_it(
    vendor: Vendor, fault: Fault, kind: tuple[str, ...]
) -> None:
    reply = ScriptedReply.of(
        thinking("plan"), text("One two three four five six."), delta_chars=2, fault=fault
    )
    with vendor.server(reply, ScriptedReply.of("must not be asked")) as server:
        provider = vendor.provider(server)
        items = await collect(Membrane(provider, retry=FAST_RETRY), make_request(vendor.model))
        await provider.aclose()
        assert len(server.requests) == 1  # output had arrived: no retry
    errors = [i for i in items if isinstance(i, ReplyError)]
    assert len(errors) == 1 and errors[0].kind in kind and errors[0].after_output
    result = result_of(items)
    assert result.error is not None and result.stop_reason == "error"
    # What arrived before the fault is kept: the thinking, hidden, and the start of
    # the text; every block that started was completed.
    said = visible(items)
    whole = "One two three four five six."
    assert said and whole.startswith(said) and said != whole
    blocks = [i.block for i in items if isinstance(i, BlockComplete)]
    assert [(b.type, b.content) for b in blocks] == [("thinking", "plan"), ("text", said)]
    assert result.blocks == tuple(blocks)


@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
async def test_a_bad_request_is_not_retried(vendor: Vendor) -> None:
    with vendor.server(ScriptedReply.http_error(400, message="bad field")) as server:
        provider = vendor.provider(server)
        items = await collect(Membrane(provider, retry=FAST_RETRY), make_request(vendor.model))
        await provider.aclose()
        assert len(server.requests) == 1
    (error,) = [i for i in items if isinstance(i, ReplyError)]
    assert error.kind == "bad_request" and error.status == 400 and not error.after_output


@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
async def test_an_unreachable_server_is_named_in_the_error(vendor: Vendor) -> None:
    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    provider = vendor.adapter(api_key="fake-key", base_url=url)
    items = await collect(Membrane(provider, retry=FAST_RETRY), make_request(vendor.model))
    await provider.aclose()
    retries = [i for i in items if isinstance(i, Retrying)]
    (error,) = [i for i in items if isinstance(i, ReplyError)]
    assert len(retries) == FAST_RETRY.max_retries  # a refused connection is retried
    assert error.kind == "connection" and url in error.message and not error.after_output


async def test_invalid_requests_fail_before_any_network_call() -> None:
    unsigned = Message(participant="Claude", content=[ThinkingContent(thinking="hmm")])
    request = make_request().model_copy(update={"messages": [*make_request().messages, unsigned]})
    with FakeAnthropic(ScriptedReply.of("never")) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        with pytest.raises(RequestError, match=r"messages\[1\]\.content\[0\]"):
            await collect(Membrane(provider, "native"), request)
        await provider.aclose()
        assert server.requests == []


async def test_cancelling_the_consumer_closes_the_stream() -> None:
    slow = ScriptedReply.of("word " * 200, delta_chars=5, delta_delay_s=0.01)
    with FakeAnthropic(slow) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        chunks = 0
        async for item in Membrane(provider).stream(make_request()):
            chunks += isinstance(item, Chunk)
            if chunks == 3:
                break
        await provider.aclose()
        with anyio.fail_after(5):
            while server.cancelled_streams == 0:
                await anyio.sleep(0.01)


async def test_callbacks_see_every_item_as_it_passes() -> None:
    seen: dict[str, list[Any]] = {"chunk": [], "block": [], "usage": []}
    with FakeAnthropic(ScriptedReply.of(thinking("plan"), text("Hi there."))) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        result = await Membrane(provider).complete(
            make_request(),
            on_chunk=lambda t, c: seen["chunk"].append(t),
            on_block=seen["block"].append,
            on_usage=seen["usage"].append,
        )
        await provider.aclose()
    assert "".join(seen["chunk"]) == "planHi there." and len(seen["block"]) == 4
    assert seen["usage"] and seen["usage"][-1].total == result.usage
    assert result.usage.output_tokens > 0


async def test_prefill_tool_loop_over_completions_where_the_stop_is_not_named() -> None:
    """OpenAI Completions says only "stop": the parser's state shows the call ended
    inside <function_calls>, so the loop still runs."""
    openai = VENDORS[1]
    first = ScriptedReply.of(
        'On it.\n<function_calls>\n<invoke name="get_weather">'
        '<parameter name="city">Paris</parameter></invoke>\n',
        stop_reason="stop_sequence",
    )
    with openai.server(first, ScriptedReply.of("\nSunny, 21 degrees.")) as server:
        provider = openai.provider(server)
        items = await collect(
            Membrane(provider, "anthropic-xml"), make_request("gpt-test"), on_tool_calls=HANDLER
        )
        await provider.aclose()
        prompts = [r.body["prompt"] for r in server.requests]
        assert [r.path for r in server.requests] == ["/v1/completions"] * 2
    assert visible(items) == "On it.\n\nSunny, 21 degrees."
    assert result_of(items).tool_rounds == 1
    assert prompts[1].startswith(prompts[0])
    assert "</invoke>\n</function_calls><function_results>" in prompts[1]


async def test_a_request_can_override_the_formatter() -> None:
    with FakeAnthropic(
        ScriptedReply.of("<thinking>plan</thinking>Hi."), ScriptedReply.of("Hi.")
    ) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        membrane = Membrane(provider, "native")
        prefill = await membrane.complete(make_request(formatter="anthropic-xml"))
        chat = await membrane.complete(make_request())
        await provider.aclose()
        first, second = (r.body for r in server.requests)
    assert [b.type for b in prefill.blocks] == ["thinking", "text"]
    assert first["messages"][-1]["role"] == "assistant"  # the transcript it continues
    assert "Claude:" in str(first["messages"][-1]["content"])
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}
    ]
    assert chat.text == "Hi."


async def test_native_tool_calls_in_a_prefill_format() -> None:
    """anthropic-xml with tool_mode="native": the transcript is continued as text,
    a call comes as a native tool_use; its result goes back as a user message."""
    from voice_membrane.formats.anthropic_xml import AnthropicXmlFormatter

    first = ScriptedReply.of(
        " Let me check.", tool_use("get_weather", {"city": "Paris"}, id="tu_1")
    )
    with FakeAnthropic(first, ScriptedReply.of("It is sunny.")) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        membrane = Membrane(provider, AnthropicXmlFormatter(tool_mode="native"))
        items = await collect(membrane, make_request(), on_tool_calls=HANDLER)
        await provider.aclose()
        bodies = [r.body for r in server.requests]
    result = result_of(items)
    assert [b.type for b in result.blocks] == ["text", "tool_call", "tool_result", "text"]
    starts = [i.index for i in items if type(i).__name__ == "BlockStart"]
    assert starts == [0, 1, 2, 3]
    assert visible(items) == " Let me check.It is sunny."
    assert "tools" in bodies[0]
    *_, turn, answer = bodies[1]["messages"]
    assert turn["role"] == "assistant" and turn["content"][-1]["type"] == "tool_use"
    assert turn["content"][0]["text"].endswith("Claude: Let me check.")
    assert answer["role"] == "user" and answer["content"][0]["tool_use_id"] == "tu_1"

"""AnthropicProvider against FakeAnthropic: stream mapping into the event
vocabulary, non-streaming parity, errors and cancellation (its requests:
``test_anthropic_request.py``)."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

import anyio
import pytest
from anthropic_calls import CHAT, CONFIG, body, collect, provider
from native_events import assemble, blocks

from voice_membrane.formats.base import BuiltRequest, ProviderMessage
from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.script import (
    Fault,
    ScriptedReply,
    redacted_thinking,
    thinking,
    tool_use,
)
from voice_membrane.vendors.errors import ProviderError
from voice_membrane.vocab.events import Block, merge_adjacent_chunks
from voice_membrane.vocab.messages import (
    TextContent,
)
from voice_membrane.vocab.provider_output import (
    NativeDelta,
    NativeStart,
    NativeStop,
    ProviderOutput,
    StopInfo,
    TextDelta,
    Usage,
)

pytestmark = pytest.mark.anyio
FAKE = FakeAnthropic  # conftest: the module's `server`, reset as `fake`
__all__ = ["provider"]  # (the fixture, used by name)
WEATHER = {"city": "Paris", "days": [1, 2], "units": "metric"}
REPLY = ScriptedReply.of(
    thinking("The user wants weather.", signature="sig-1"),
    redacted_thinking("opaque=="),
    "Let me check.",
    tool_use("get_weather", WEATHER, id="toolu_1"),
    delta_chars=4,
)


# ---------------------------------------------------------------- stream mapping


async def test_chat_stream_becomes_native_blocks(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.add(REPLY)
    outputs = await collect(provider)
    assert outputs[0] == Usage(12, 1)
    assert outputs[1] == NativeStart("thinking")
    assert NativeStart("thinking", redacted_data="opaque==") in outputs
    assert NativeStart("text") in outputs
    assert NativeStart("tool_call", "toolu_1", "get_weather") in outputs
    assert NativeStop(signature="sig-1") in outputs
    tool_deltas = outputs[outputs.index(NativeStart("tool_call", "toolu_1", "get_weather")) :]
    pieces = [item.text for item in tool_deltas if isinstance(item, NativeDelta)]
    assert len(pieces) > 3 and "" not in pieces  # split input, no empty first delta
    assert outputs[-2:] == [Usage(12, REPLY.usage_out()), StopInfo("tool_use", None, "tool_use")]
    assert blocks(outputs) == [
        Block("thinking", "The user wants weather.", signature="sig-1"),
        Block("thinking", "", redacted_data="opaque=="),
        Block("text", "Let me check."),
        Block("tool_call", None, "toolu_1", "get_weather", WEATHER),
    ]


async def test_non_streaming_gives_the_same_events(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.add(REPLY, REPLY)
    streamed = await collect(provider)
    whole = await collect(provider, streaming=False)
    assert "stream" not in body(fake) or body(fake)["stream"] is False
    assert merge_adjacent_chunks(assemble(whole)) == merge_adjacent_chunks(assemble(streamed))
    assert whole[0] == Usage(12, REPLY.usage_out()) and whole[-1] == streamed[-1]


async def test_prefill_stream_is_raw_text(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    raw = "<thinking>hm</thinking>Hello there."
    fake.add(
        ScriptedReply.of(raw, delta_chars=5, stop_reason="stop_sequence", stop_sequence="\nUser:"),
        ScriptedReply.of(raw),
    )
    built = BuiltRequest(
        "prefill",
        [ProviderMessage("user", [TextContent(text="<cmd>cat untitled.log</cmd>")])],
        prefill="User: hi\nAssistant: ",
        stop_sequences=["\nUser:"],
    )
    config = CONFIG.model_copy(update={"thinking_budget": 1024})
    outputs = await collect(provider, built, config)
    texts = [item for item in outputs if isinstance(item, TextDelta)]
    assert "".join(t.text for t in texts) == raw and len(texts) > 1
    assert not [item for item in outputs if isinstance(item, NativeStart | NativeStop)]
    assert outputs[-1] == StopInfo("stop_sequence", "\nUser:", "stop_sequence")
    sent = body(fake)
    assert sent["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "User: hi\nAssistant:"}],
    }
    assert "thinking" not in sent and sent["temperature"] == 0.5
    assert sent["stop_sequences"] == ["\nUser:"]
    whole = await collect(provider, built, config, streaming=False)
    assert [item for item in whole if isinstance(item, TextDelta)] == [TextDelta(raw)]


# ---------------------------------------------------------------- errors


async def test_rate_limit_with_retry_after_and_no_sdk_retry(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.add(ScriptedReply.http_error(429, retry_after=2.5, message="slow down"))
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    error = caught.value
    assert (error.provider, error.kind, error.status, error.retry_after_s) == (
        "anthropic",
        "rate_limit",
        429,
        2.5,
    )
    assert error.detail == "slow down" and error.retryable
    assert len(fake.requests) == 1  # the SDK's own retries are off


@pytest.mark.parametrize(
    ("status", "kind"), [(529, "overloaded"), (500, "server"), (400, "bad_request")]
)
async def test_http_status_kinds(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int, kind: str
) -> None:
    fake.add(ScriptedReply.http_error(status))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, streaming=status != 500)
    assert (caught.value.kind, caught.value.status) == (kind, status)


@pytest.mark.parametrize(
    ("status", "kind"), [(500, "server"), (529, "overloaded"), (429, "rate_limit"), (400, "stream")]
)
async def test_error_event_after_three_deltas(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int, kind: str
) -> None:
    fault = Fault("error_event", after_deltas=3, status=status, message="boom")
    fake.add(ScriptedReply.of("abcdefgh", delta_chars=1, fault=fault))
    outputs: list[ProviderOutput] = []
    with pytest.raises(ProviderError) as caught:
        await collect(provider, into=outputs)
    assert [item for item in outputs if isinstance(item, NativeDelta)] == [
        NativeDelta("a"),
        NativeDelta("b"),
        NativeDelta("c"),
    ]
    assert caught.value.kind == kind and "boom" in caught.value.detail
    assert caught.value.status is None


async def test_malformed_line(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.add(ScriptedReply.of("abcdef", delta_chars=1, fault=Fault("malformed", 2)))
    outputs: list[ProviderOutput] = []
    with pytest.raises(ProviderError) as caught:
        await collect(provider, into=outputs)
    assert caught.value.kind == "stream" and "not JSON" in caught.value.detail
    assert len([item for item in outputs if isinstance(item, NativeDelta)]) == 2


async def test_dropped_connection_keeps_earlier_deltas(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.add(ScriptedReply.of("abcdef", delta_chars=1, fault=Fault("drop", 4)))
    outputs: list[ProviderOutput] = []
    with pytest.raises(ProviderError) as caught:
        await collect(provider, into=outputs)
    assert caught.value.kind == "connection" and caught.value.retryable
    assert "".join(i.text for i in outputs if isinstance(i, NativeDelta)) == "abcd"


async def test_non_streaming_drop_and_unreachable_server(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.add(ScriptedReply.of("abc", fault=Fault("drop")))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, streaming=False)
    assert caught.value.kind == "connection"
    closed = AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9", timeout_s=2)
    with pytest.raises(ProviderError) as caught:
        await collect(closed)
    assert caught.value.kind == "connection"
    await closed.aclose()


async def test_read_timeout(fake: FakeAnthropic) -> None:
    fake.add(ScriptedReply.of("late", ttft_s=2))
    slow = AnthropicProvider(api_key="k", base_url=fake.base_url, timeout_s=0.2)
    with pytest.raises(ProviderError) as caught:
        await collect(slow)
    await slow.aclose()
    assert caught.value.kind == "timeout"


async def test_missing_key_is_an_auth_error(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("API_KEY", "AUTH_TOKEN", "PROFILE", "CONFIG_DIR", "IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(f"ANTHROPIC_{name}", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no credentials profile on disk either
    keyless = AnthropicProvider(base_url=fake.base_url)
    with pytest.raises(ProviderError) as caught:
        await collect(keyless)
    assert caught.value.kind == "auth" and "ANTHROPIC_API_KEY" in str(caught.value)
    assert fake.requests == []
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    fake.add(ScriptedReply.of("ok"))
    from_env = AnthropicProvider(base_url=fake.base_url)
    await collect(from_env)
    await from_env.aclose()
    assert fake.requests[-1].headers["authorization"] == "Bearer from-env"


# ---------------------------------------------------------------- cancellation


async def test_closing_the_stream_closes_the_http_response(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.add(ScriptedReply.of("x" * 400, delta_chars=1, delta_delay_s=0.005))
    got = 0
    async with aclosing(provider.stream(CHAT, CONFIG)) as items:
        async for item in items:
            got += isinstance(item, NativeDelta)
            if got == 3:
                break
    with anyio.fail_after(3):
        while fake.cancelled_streams == 0:
            await anyio.sleep(0.01)
    assert fake.cancelled_streams == 1


async def test_cancelling_the_consumer_closes_the_http_response(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.add(ScriptedReply.of("x" * 400, delta_chars=1, delta_delay_s=0.005))
    seen = anyio.Event()

    async def consume() -> None:
        async with aclosing(provider.stream(CHAT, CONFIG)) as items:
            async for item in items:
                if isinstance(item, NativeDelta):
                    seen.set()

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await seen.wait()
        group.cancel_scope.cancel()
    with anyio.fail_after(3):
        while fake.cancelled_streams == 0:
            await anyio.sleep(0.01)
    assert fake.cancelled_streams == 1

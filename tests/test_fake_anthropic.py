"""FakeAnthropic speaks the real Messages protocol: the official SDK parses its
streams and whole messages, and sees its errors as it would the real API's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import pytest

from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.script import (
    Fault,
    ScriptedReply,
    redacted_thinking,
    thinking,
    tool_use,
)

pytestmark = pytest.mark.anyio
FAKE = FakeAnthropic  # conftest: the module's `server`, reset as `fake`
HI: list[Any] = [{"role": "user", "content": "Hi"}]
REPLY = ScriptedReply.of(
    thinking("The user greets.", signature="sig-1"),
    redacted_thinking("opaque=="),
    "Hello! Let me check.",
    tool_use("get_weather", {"city": "Paris", "days": 3}),
    delta_chars=5,
)


@pytest.fixture
async def sdk(fake: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(
        base_url=fake.base_url, api_key="k", max_retries=0
    ) as client:
        yield client


def sse_events(raw: str) -> list[tuple[str, Any]]:
    """``(event, data)`` pairs of a raw SSE body."""
    out = []
    for frame in raw.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        out.append((lines["event"], json.loads(lines["data"])))
    return out


async def test_the_sdk_stream_parses_every_block_kind(
    fake: FakeAnthropic, sdk: anthropic.AsyncAnthropic
) -> None:
    fake.add(REPLY)
    async with sdk.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
        texts = [text async for text in stream.text_stream]
        message = await stream.get_final_message()
    assert "".join(texts) == "Hello! Let me check."
    assert [block.model_dump(exclude_none=True) for block in message.content] == [
        {"type": "thinking", "thinking": "The user greets.", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque=="},
        {"type": "text", "text": "Hello! Let me check."},
        {
            "type": "tool_use",
            "id": "toolu_fake_1",
            "name": "get_weather",
            "input": {"city": "Paris", "days": 3},
        },
    ]
    assert message.stop_reason == "tool_use"
    assert message.usage.input_tokens == 12 and message.usage.output_tokens == REPLY.usage_out()


async def test_the_raw_stream_follows_the_documented_event_order(fake: FakeAnthropic) -> None:
    fake.add(REPLY)
    async with httpx2.AsyncClient(base_url=fake.base_url) as http:
        response = await http.post(
            "/v1/messages",
            json={"model": "m", "max_tokens": 64, "messages": HI, "stream": True},
            headers={"x-api-key": "k"},
        )
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in events)
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert set(start["usage"]) >= {
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    }
    deltas = [(d["index"], d["delta"]) for n, d in events if n == "content_block_delta"]
    thinking_deltas = [delta for index, delta in deltas if index == 0]
    assert thinking_deltas[-1] == {"type": "signature_delta", "signature": "sig-1"}
    assert [d["thinking"] for d in thinking_deltas[:-1]] == ["The u", "ser g", "reets", "."]
    assert not [delta for index, delta in deltas if index == 1]  # redacted: whole at its start
    tool = [delta["partial_json"] for index, delta in deltas if index == 3]
    assert tool[0] == "" and json.loads("".join(tool)) == {"city": "Paris", "days": 3}
    assert all(len(piece) <= 5 for piece in tool)
    stops = [data["index"] for name, data in events if name == "content_block_stop"]
    assert stops == [0, 1, 2, 3]
    assert events[-2][1]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert events[-2][1]["usage"] == {"output_tokens": REPLY.usage_out()}


async def test_create_without_stream_returns_the_whole_message(
    fake: FakeAnthropic, sdk: anthropic.AsyncAnthropic
) -> None:
    fake.add(ScriptedReply.of("Hi there.", tool_use("f", {"x": 1}, id="toolu_given")))
    message = await sdk.messages.create(model="m", max_tokens=64, messages=HI)
    assert [block.type for block in message.content] == ["text", "tool_use"]
    assert message.content[1].model_dump(exclude_none=True)["id"] == "toolu_given"
    assert message.stop_reason == "tool_use" and message.model == "m"


async def test_stop_sequence_reported_from_the_request(
    fake: FakeAnthropic, sdk: anthropic.AsyncAnthropic
) -> None:
    fake.add(ScriptedReply.of("Hello", stop_reason="stop_sequence"))
    message = await sdk.messages.create(
        model="m", max_tokens=64, messages=HI, stop_sequences=["\nUser:"]
    )
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "\nUser:")


@pytest.mark.parametrize(
    ("status", "error_class", "error_type"),
    [
        (529, anthropic.OverloadedError, "overloaded_error"),
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (400, anthropic.BadRequestError, "invalid_request_error"),
    ],
)
async def test_http_errors_carry_the_vendor_body(
    fake: FakeAnthropic,
    sdk: anthropic.AsyncAnthropic,
    status: int,
    error_class: type[Exception],
    error_type: str,
) -> None:
    fake.add(ScriptedReply.http_error(status, retry_after=2, message="nope"))
    with pytest.raises(error_class) as caught:
        await sdk.messages.create(model="m", max_tokens=64, messages=HI)
    error = caught.value
    assert isinstance(error, anthropic.APIStatusError)
    assert (error.type, error.api_message) == (error_type, "nope")
    assert error.response.headers["retry-after"] == "2"
    assert error.request_id is not None and error.request_id.startswith("req_fake_")


async def test_an_error_event_ends_the_stream_after_the_scripted_deltas(
    fake: FakeAnthropic, sdk: anthropic.AsyncAnthropic
) -> None:
    fake.add(ScriptedReply.of("abcdef", delta_chars=1, fault=Fault("error_event", 2, status=529)))
    texts: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as caught:
        async with sdk.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
            async for text in stream.text_stream:
                texts.append(text)
    assert texts == ["a", "b"]
    assert caught.value.type == "overloaded_error"


async def test_malformed_and_dropped_streams_fail_in_the_sdk(
    fake: FakeAnthropic, sdk: anthropic.AsyncAnthropic
) -> None:
    fake.add(
        ScriptedReply.of("abc", delta_chars=1, fault=Fault("malformed", 1)),
        ScriptedReply.of("abc", delta_chars=1, fault=Fault("drop", 2)),
    )
    with pytest.raises(json.JSONDecodeError):
        async with sdk.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
            await stream.until_done()
    texts: list[str] = []
    # anthropic 2.12 does not wrap transport errors raised while a stream is read
    with pytest.raises(httpx2.RemoteProtocolError):
        async with sdk.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
            async for text in stream.text_stream:
                texts.append(text)
    assert texts == ["a", "b"]


async def test_requests_the_real_api_rejects(
    fake: FakeAnthropic, sdk: anthropic.AsyncAnthropic
) -> None:
    fake.add(ScriptedReply.of("kept for the next valid request"))
    prefill: list[Any] = [*HI, {"role": "assistant", "content": "Sure, "}]
    with pytest.raises(anthropic.BadRequestError, match="trailing whitespace"):
        await sdk.messages.create(model="m", max_tokens=64, messages=prefill)
    prefill[-1] = {"role": "assistant", "content": "Sure,"}
    with pytest.raises(anthropic.BadRequestError, match="thinking"):
        await sdk.messages.create(
            model="m",
            max_tokens=4096,
            messages=prefill,
            thinking={"type": "enabled", "budget_tokens": 1024},
        )
    assert fake.pending == 1  # a rejected request uses no scripted reply
    message = await sdk.messages.create(model="m", max_tokens=64, messages=prefill)
    assert message.content[0].model_dump()["text"] == "kept for the next valid request"
    with pytest.raises(anthropic.InternalServerError, match="no scripted reply left"):
        await sdk.messages.create(model="m", max_tokens=64, messages=HI)
    assert len(fake.requests) == 4
    assert fake.requests[0].path == "/v1/messages"
    assert fake.requests[0].headers["authorization"] == "Bearer k"


async def test_env_points_the_sdk_at_the_fake(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    fake.add(ScriptedReply.of("From the environment."))
    async with anthropic.AsyncAnthropic(max_retries=0) as from_env:
        message = await from_env.messages.create(model="m", max_tokens=64, messages=HI)
    assert message.content[0].model_dump()["text"] == "From the environment."
    assert fake.env()["ANTHROPIC_BASE_URL"] == fake.base_url == fake.origin

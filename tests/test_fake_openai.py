"""FakeOpenAI speaks the real wire protocol: the official ``openai`` SDK parses
its streams and whole objects into the scripted content, and its faults into
the SDK's own errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai import (
    APIConnectionError,
    APIError,
    AsyncOpenAI,
    BadRequestError,
    InternalServerError,
    RateLimitError,
)

from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import Fault, ScriptedReply, text, thinking, tool_use

pytestmark = pytest.mark.anyio
USER = [{"role": "user", "content": "Weather in Paris and Rome?"}]
REPLY = ScriptedReply.of(
    thinking("Two cities."),
    text("Checking both."),
    tool_use("get_weather", {"city": "Paris"}, id="call_a"),
    tool_use("get_weather", {"city": "Rome"}),
    delta_chars=5,
)


def client(server: FakeOpenAI) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=server.base_url, api_key="fake-key", max_retries=0)


async def chat_stream(server: FakeOpenAI, **kw: Any) -> list[Any]:
    async with client(server) as sdk:
        stream = await sdk.chat.completions.create(
            model="gpt-test", messages=USER, stream=True, **kw
        )
        return [chunk async for chunk in stream]


def assemble(chunks: list[Any], reasoning_field: str = "reasoning_content") -> dict[str, Any]:
    """The scripted content back from parsed chunks."""
    out: dict[str, Any] = {"content": "", "reasoning": "", "calls": {}, "finish": None}
    for chunk in chunks:
        for choice in chunk.choices:
            delta = choice.delta
            out["content"] += delta.content or ""
            out["reasoning"] += (delta.model_extra or {}).get(reasoning_field) or ""
            for call in delta.tool_calls or []:
                entry = out["calls"].setdefault(call.index, {"id": None, "name": "", "args": ""})
                entry["id"] = call.id or entry["id"]
                entry["name"] += call.function.name or ""
                entry["args"] += call.function.arguments or ""
            out["finish"] = choice.finish_reason or out["finish"]
    return out


async def test_sdk_parses_chat_stream() -> None:
    with FakeOpenAI(REPLY) as server:
        chunks = await chat_stream(server, stream_options={"include_usage": True})
    assert chunks[0].choices[0].delta.role == "assistant"
    got = assemble(chunks)
    assert got["content"] == "Checking both."
    assert got["reasoning"] == "Two cities."
    assert got["finish"] == "tool_calls"
    calls = got["calls"]
    assert [calls[0]["id"], calls[0]["name"], json.loads(calls[0]["args"])] == [
        "call_a",
        "get_weather",
        {"city": "Paris"},
    ]
    assert calls[1]["id"].startswith("call_fake_")
    assert json.loads(calls[1]["args"]) == {"city": "Rome"}
    assert chunks[-1].choices == []
    usage = chunks[-1].usage
    assert usage.prompt_tokens == 12
    assert usage.completion_tokens_details.reasoning_tokens == 3


async def test_usage_chunk_only_when_asked_and_reasoning_spelling() -> None:
    with FakeOpenAI(REPLY, reasoning_field="reasoning") as server:
        chunks = await chat_stream(server)
    assert all(chunk.choices and chunk.usage is None for chunk in chunks)
    got = assemble(chunks, "reasoning")
    assert got["reasoning"] == "Two cities."
    assert assemble(chunks)["reasoning"] == ""


async def test_sdk_parses_whole_chat_completion() -> None:
    with FakeOpenAI(REPLY) as server:
        async with client(server) as sdk:
            done = await sdk.chat.completions.create(model="gpt-test", messages=USER)
    message = done.choices[0].message
    assert message.content == "Checking both."
    assert (message.model_extra or {})["reasoning_content"] == "Two cities."
    assert [call.function.name for call in message.tool_calls or []] == ["get_weather"] * 2
    assert done.choices[0].finish_reason == "tool_calls"
    assert done.usage is not None and done.usage.prompt_tokens == 12


async def test_sdk_parses_legacy_completions() -> None:
    reply = ScriptedReply.of(" Hello", " world.", stop_reason="max_tokens", delta_chars=4)
    with FakeOpenAI(reply, reply) as server:
        async with client(server) as sdk:
            stream = await sdk.completions.create(model="base", prompt="Say:", stream=True)
            chunks = [chunk async for chunk in stream]
            whole = await sdk.completions.create(model="base", prompt="Say:")
    assert {chunk.object for chunk in chunks} == {"text_completion"}
    assert "".join(c.choices[0].text for c in chunks) == " Hello world."
    assert chunks[-1].choices[0].finish_reason == "length"
    assert whole.choices[0].text == " Hello world."
    assert server.requests[0].path == "/v1/completions"


async def test_legacy_leaked_stop_and_named_stop() -> None:
    reply = ScriptedReply.of("Bob: hi", stop_reason="stop_sequence")
    with FakeOpenAI(reply, leak_stop=True, stop_field="stop_reason") as server:
        async with client(server) as sdk:
            whole = await sdk.completions.create(model="base", prompt="x", stop=["\nUser:"])
    choice = whole.choices[0]
    assert choice.text == "Bob: hi\nUser:"
    assert choice.finish_reason == "stop"
    assert (choice.model_extra or {})["stop_reason"] == "\nUser:"


async def test_http_error_has_openai_body_and_retry_after() -> None:
    with FakeOpenAI(ScriptedReply.http_error(429, retry_after=0.5)) as server:
        async with client(server) as sdk:
            with pytest.raises(RateLimitError) as caught:
                await sdk.chat.completions.create(model="gpt-test", messages=USER)
    assert caught.value.response.headers["retry-after"] == "0.5"
    assert caught.value.code == "rate_limit_exceeded"
    assert isinstance(caught.value.body, dict)
    assert set(caught.value.body) == {"message", "type", "param", "code"}


async def test_rejects_what_the_real_api_rejects() -> None:
    with FakeOpenAI(REPLY) as server:
        sdk = client(server)
        with pytest.raises(BadRequestError, match="maximum length 4"):
            await sdk.chat.completions.create(
                model="gpt-test", messages=USER, stop=["a", "b", "c", "d", "e"]
            )
        orphan = [*USER, {"role": "tool", "tool_call_id": "call_x", "content": "sunny"}]
        with pytest.raises(BadRequestError, match="role 'tool'"):
            await sdk.chat.completions.create(model="gpt-test", messages=orphan)
        assert server.pending == 1  # a rejected request takes no reply
        await sdk.chat.completions.create(model="gpt-test", messages=USER)
        with pytest.raises(InternalServerError, match="no scripted reply left"):
            await sdk.chat.completions.create(model="gpt-test", messages=USER)
        await sdk.close()


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (Fault("error_event", after_deltas=2, status=500), APIError),
        (Fault("malformed", after_deltas=2), json.JSONDecodeError),
        (Fault("drop", after_deltas=2), APIConnectionError),
    ],
    ids=["error_event", "malformed", "drop"],
)
async def test_mid_stream_faults(fault: Fault, error: type[Exception]) -> None:
    reply = ScriptedReply.of("abcdefgh", delta_chars=2, fault=fault)
    got: list[str] = []
    with FakeOpenAI(reply) as server, pytest.raises(error):
        async with client(server) as sdk:
            stream = await sdk.chat.completions.create(model="gpt-test", messages=USER, stream=True)
            async for chunk in stream:
                got.append(chunk.choices[0].delta.content or "")
    assert "".join(got) == "abcd"


def test_env_points_the_sdk_at_the_fake() -> None:
    with FakeOpenAI() as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server.env() == {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "fake-key"}


def test_streamed_deltas_keep_their_scripted_deadlines_however_late_the_fake_wakes() -> None:
    """The fakes' fixed service times are deadlines from the request's arrival
    (TTFT, then one per delta_delay_s, a pause moving the rest on): a late
    wake-up (here a 30 ms stall between deltas) is never added to later ones."""
    import anyio

    from voice_membrane.testing.fake_server import ReplyClock
    from voice_membrane.testing.script import Pause

    reply = ScriptedReply.of(
        "abcdefgh", ttft_s=0.2, delta_delay_s=0.05, delta_chars=2, pauses=(Pause(2, 1.0),)
    )

    async def deadlines() -> list[float]:
        start = anyio.current_time()
        clock = ReplyClock(start)
        due = []
        for sent in range(4):
            due.append(clock.next(reply, sent) - start)
            if reply.pauses_at(sent):
                due[-1] = clock.hold(sum(p.seconds for p in reply.pauses_at(sent))) - start
            await anyio.sleep(0.03)  # woken late
        return due

    due = anyio.run(deadlines)
    assert due == pytest.approx([0.2, 0.25, 1.3, 1.35], abs=0.005)

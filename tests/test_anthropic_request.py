"""AnthropicProvider's requests against FakeAnthropic: every block's mapping,
the streaming body written as ``create`` would send it, and what is refused
before any call."""

from __future__ import annotations

from datetime import date
from typing import Any

import anthropic
import pytest
from anthropic_calls import CONFIG, body, collect, provider

from voice_membrane.formats.base import BuiltRequest, ProviderMessage
from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.providers.anthropic_request import streaming_body
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.script import ScriptedReply
from voice_membrane.vocab.messages import (
    Base64Source,
    CacheControl,
    ImageContent,
    RedactedThinkingContent,
    RequestError,
    TextContent,
    ThinkingContent,
    ToolDefinition,
    ToolResultContent,
    ToolUseContent,
    UrlSource,
)

pytestmark = pytest.mark.anyio
FAKE = FakeAnthropic  # conftest: the module's `server`, reset as `fake`
__all__ = ["provider"]  # (the fixture, used by name)


def rich_request(mode: str = "chat") -> BuiltRequest:
    """A conversation with every kind of block, a cached system prompt, stop
    sequences, a tool and extra parameters."""
    history = [
        ProviderMessage(
            "user",
            [
                TextContent(text="Look:", cache_control=CacheControl(ttl="1h")),
                ImageContent(source=Base64Source(media_type="image/png", data="iVBO")),
                ImageContent(source=UrlSource(url="https://example.com/a.jpg")),
                ImageContent(source=UrlSource(url="data:image/gif;base64,R0lG")),
                TextContent(text=""),  # the API rejects empty text blocks: left out
            ],
        ),
        ProviderMessage(
            "assistant",
            [
                ThinkingContent(thinking="Hmm.", signature="sig-0"),
                RedactedThinkingContent(data="opaque"),
                ToolUseContent(id="toolu_0", name="get_weather", input={"city": "Oslo"}),
            ],
        ),
        ProviderMessage(
            "user",
            [
                ToolResultContent(tool_use_id="toolu_0", content="12 C"),
                ToolResultContent(
                    tool_use_id="toolu_0",
                    content=[TextContent(text="failed")],
                    is_error=True,
                ),
            ],
        ),
    ]
    tool = ToolDefinition(
        name="get_weather",
        description="Weather by city.",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    return BuiltRequest(
        mode,  # type: ignore[arg-type]
        history,
        system="Be brief.",
        system_cache=True,
        stop_sequences=["STOP"],
        tools=[tool],
        params={"metadata": {"user_id": "u1"}, "top_k": 5},
        prefill="Sure, " if mode == "prefill" else None,
    )


async def test_request_mapping(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.add(ScriptedReply.of("ok"))
    built = rich_request()
    await collect(provider, built, CONFIG.model_copy(update={"thinking_budget": 1024}))
    sent = body(fake)
    assert fake.requests[-1].headers["authorization"] == "Bearer k"
    assert sent["model"] == "claude-test" and sent["max_tokens"] == 2048 and sent["stream"]
    assert sent["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert "temperature" not in sent  # the API allows none with thinking
    assert sent["stop_sequences"] == ["STOP"]
    assert sent["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather by city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    assert sent["metadata"] == {"user_id": "u1"} and sent["top_k"] == 5
    assert sent["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "Look:",
                    "cache_control": {"type": "ephemeral", "ttl": "1h"},
                },
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                },
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/gif", "data": "R0lG"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Hmm.", "signature": "sig-0"},
                {"type": "redacted_thinking", "data": "opaque"},
                {
                    "type": "tool_use",
                    "id": "toolu_0",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_0", "content": "12 C"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_0",
                    "content": [{"type": "text", "text": "failed"}],
                    "is_error": True,
                },
            ],
        },
    ]


@pytest.mark.parametrize("mode", ["chat", "prefill"])
@pytest.mark.parametrize("thinking_budget", [None, 1024])
async def test_body_on_the_wire_is_what_the_sdk_create_sends(
    fake: FakeAnthropic, provider: AnthropicProvider, mode: str, thinking_budget: int | None
) -> None:
    """The streaming body is written once and posted as it is, skipping the
    client's copy of the conversation: what the server receives is the same,
    and so are the headers that say who asks and in what."""
    fake.add(ScriptedReply.of("ok"), ScriptedReply.of("ok"))
    built = rich_request(mode)
    config = CONFIG.model_copy(update={"thinking_budget": thinking_budget})
    await collect(provider, built, config)
    params = provider.request_body(built, config)
    client = anthropic.AsyncAnthropic(api_key="k", base_url=fake.base_url, max_retries=0)
    try:
        async for _ in await client.messages.create(**params):
            pass
    finally:
        await client.close()
    ours, sdks = fake.requests[-2], fake.requests[-1]
    assert ours.body == sdks.body and ours.path == sdks.path == "/v1/messages"
    for name in ("content-type", "anthropic-version", "authorization", "x-api-key"):
        assert ours.headers.get(name) == sdks.headers.get(name), name


def test_the_body_is_written_as_the_sdk_writes_it() -> None:
    """Compact UTF-8 JSON, extra parameters merged at the top, a date in ISO
    form; NaN refused, as the SDK refuses it."""
    params: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "héllo"}]}
    params["extra_body"] = {"top_k": 5, "metadata": {"day": date(2026, 11, 30)}}
    written = streaming_body(params)
    assert (
        written
        == (
            '{"model":"m","messages":[{"role":"user","content":"héllo"}],"stream":true,'
            '"top_k":5,"metadata":{"day":"2026-11-30"}}'
        ).encode()
    )
    with pytest.raises(ValueError):
        streaming_body({"model": "m", "extra_body": {"temperature": float("nan")}})


async def test_unsigned_thinking_is_refused_before_any_call(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    built = BuiltRequest(
        "chat",
        [
            ProviderMessage("user", [TextContent(text="hi")]),
            ProviderMessage("assistant", [ThinkingContent(thinking="unsigned")]),
        ],
    )
    with pytest.raises(RequestError, match=r"messages\[1\]\.content\[0\]"):
        await collect(provider, built)
    assert fake.requests == []

"""What the Anthropic adapter's tests share: the call's config, a first
question, the adapter on the module's fake (``provider``, a fixture) and one
call's outputs (``collect``), the body the fake received (``body``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import pytest

from voice_membrane.formats.base import BuiltRequest, ProviderMessage
from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.vocab.messages import ModelConfig, TextContent
from voice_membrane.vocab.provider_output import ProviderOutput

CONFIG = ModelConfig(model="claude-test", max_tokens=2048, temperature=0.5)
CHAT = BuiltRequest("chat", [ProviderMessage("user", [TextContent(text="Weather in Paris?")])])


@pytest.fixture
async def provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    adapter = AnthropicProvider(api_key="k", base_url=fake.base_url, timeout_s=5)
    await adapter.start()
    yield adapter
    await adapter.aclose()


async def collect(
    provider: AnthropicProvider,
    built: BuiltRequest = CHAT,
    config: ModelConfig = CONFIG,
    *,
    streaming: bool = True,
    into: list[ProviderOutput] | None = None,
) -> list[ProviderOutput]:
    """All outputs of one call (also appended to ``into``, kept when it raises)."""
    out = [] if into is None else into
    async with aclosing(provider.stream(built, config, streaming=streaming)) as items:
        async for item in items:
            out.append(item)
    return out


def body(fake: FakeAnthropic, n: int = -1) -> dict[str, Any]:
    recorded = fake.requests[n].body
    assert isinstance(recorded, dict)
    return recorded

"""A cloud provider's start() loads the HTTP stack, so the first turn's request
does not: the shared TLS context is built (in a worker thread) before any
request, and a missing key is still reported by the first stream, not by start."""

from __future__ import annotations

from typing import Any

import pytest

from voice_membrane.formats.base import BuiltRequest, ProviderMessage
from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.providers.gemini import GeminiProvider
from voice_membrane.providers.openai import OpenAIProvider
from voice_membrane.vendors.errors import ProviderError
from voice_membrane.vendors.tls import shared_ssl_context
from voice_membrane.vocab.messages import ModelConfig, TextContent

pytestmark = pytest.mark.anyio
HELLO = BuiltRequest("chat", [ProviderMessage("user", [TextContent(text="Hi")])])
NOWHERE = "http://127.0.0.1:9"  # nothing is sent
PROVIDERS = [
    pytest.param(lambda: OpenAIProvider(api_key="k", base_url=NOWHERE + "/v1"), id="openai"),
    pytest.param(lambda: AnthropicProvider(api_key="k", base_url=NOWHERE), id="anthropic"),
    pytest.param(lambda: GeminiProvider(api_key="k", base_url=NOWHERE), id="gemini"),
]


@pytest.mark.parametrize("make", PROVIDERS)
async def test_start_builds_the_shared_tls_context(make: Any) -> None:
    shared_ssl_context.cache_clear()
    provider = make()
    try:
        await provider.start()
        assert shared_ssl_context.cache_info().currsize == 1
    finally:
        await provider.aclose()


@pytest.mark.parametrize("make", [OpenAIProvider, AnthropicProvider])
async def test_a_missing_key_is_still_reported_by_the_stream(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    provider = make(base_url=NOWHERE)
    await provider.start()  # no error here
    with pytest.raises(ProviderError) as caught:
        async for _ in provider.stream(HELLO, ModelConfig(model="m")):
            pass
    assert caught.value.kind == "auth"
    await provider.aclose()

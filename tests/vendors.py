"""The three vendors side by side, for tests that run the same script through
each: its fake server and an adapter pointed at it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.providers.base import Provider
from voice_membrane.providers.gemini import GeminiProvider
from voice_membrane.providers.openai import OpenAIProvider
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.fake_gemini import FakeGemini
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.fake_server import FakeServer
from voice_membrane.testing.script import ScriptedReply


@dataclass(frozen=True)
class Vendor:
    name: str
    fake: Callable[..., FakeServer]
    adapter: Callable[..., Provider]
    model: str

    def provider(self, server: FakeServer) -> Provider:
        return self.adapter(api_key="fake-key", base_url=server.base_url)

    def server(self, *replies: ScriptedReply) -> FakeServer:
        return self.fake(*replies)


VENDORS = [
    Vendor("anthropic", FakeAnthropic, AnthropicProvider, "claude-test"),
    Vendor("openai", FakeOpenAI, OpenAIProvider, "gpt-test"),
    Vendor("gemini", FakeGemini, GeminiProvider, "gemini-test"),
]

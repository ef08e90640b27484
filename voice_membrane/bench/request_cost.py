"""Before the first byte: µs from each vendor adapter's ``stream()`` to its
request's hand-over to HTTP, by the conversation's length (every turn pays it
before the first token).

Chat mode, a system prompt, alternating user and assistant messages; the one
transport of all three SDKs (``httpx2.AsyncClient.send``) is replaced for the
run by one that notes the time and refuses the request, so what is timed is
building, validating and serialising it, with no network. A call that never
reached the transport fails the run: a fast figure cannot come from an adapter
that gave up early."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from unittest.mock import patch

import anyio
import httpx2

from ..formats.base import BuiltRequest, ProviderMessage
from ..providers.anthropic import AnthropicProvider
from ..providers.base import Provider
from ..providers.gemini import GeminiProvider
from ..providers.openai import OpenAIProvider
from ..vocab.messages import ModelConfig, TextContent
from .stats import median, median_min_max

VENDORS = ("anthropic", "openai", "gemini")
PROVIDERS: dict[str, Callable[..., Provider]] = {
    "anthropic": AnthropicProvider,
    "openai": OpenAIProvider,
    "gemini": GeminiProvider,
}
LENGTHS = (1, 21, 101)  # messages: a first question; ten exchanges, fifty, and the next question
MESSAGE = "What is the weather like in Paris today, and should I take an umbrella? " * 2
SYSTEM = "You are a helpful voice assistant. Answer in one or two short sentences. " * 4


@dataclass(frozen=True, slots=True)
class RequestCost:
    """One vendor at one conversation length: µs from ``stream()`` to the
    request's hand-over, one median per repetition (of ``calls`` calls)."""

    vendor: str
    messages: int
    calls: int
    us: tuple[float, ...]

    def spread(self) -> tuple[float, float, float]:
        """(median, min, max) over the repetitions."""
        return median_min_max(self.us)


class _Sent(Exception):
    """The request reached the transport (raised in place of sending it)."""


def conversation(messages: int) -> BuiltRequest:
    """``messages`` alternating user and assistant messages, a user's last."""
    roles = ["user" if (messages - n) % 2 else "assistant" for n in range(messages)]
    body = [ProviderMessage(role, [TextContent(text=MESSAGE)]) for role in roles]  # type: ignore[arg-type]
    return BuiltRequest("chat", body, system=SYSTEM)


async def one_call(provider: Any, built: BuiltRequest, config: ModelConfig) -> float:
    """Seconds from the call to the hand-over."""
    sent: list[float] = []

    async def refuse(self: httpx2.AsyncClient, request: httpx2.Request, **_: Any) -> Any:
        sent.append(time.perf_counter())
        raise _Sent

    with patch.object(httpx2.AsyncClient, "send", refuse):
        started = time.perf_counter()
        try:
            async for _ in provider.stream(built, config):
                break
        except Exception as exc:  # _Sent, or what an adapter wrapped it in
            if not _sent_in(exc):
                raise
    if not sent:
        raise RuntimeError(f"{provider.name}: the request never reached the transport")
    return sent[0] - started


def _sent_in(exc: BaseException | None) -> bool:
    """Whether ``exc`` or one of its causes is ``_Sent``."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, _Sent):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


async def _measure(vendor: str, messages: int, calls: int, repeats: int) -> RequestCost:
    # A base URL nobody answers on: nothing is sent (the transport refuses first).
    url = "http://127.0.0.1:9/v1" if vendor == "openai" else "http://127.0.0.1:9"
    provider = PROVIDERS[vendor](api_key="bench-key", base_url=url)
    built, config = conversation(messages), ModelConfig(model="bench-model", max_tokens=300)
    try:
        for _ in range(max(3, calls // 10)):  # warm-up: the SDKs' lazy imports and caches
            await one_call(provider, built, config)
        medians = []
        for _ in range(repeats):
            seconds = [await one_call(provider, built, config) for _ in range(calls)]
            medians.append(round(median(seconds) * 1e6, 1))
    finally:
        await provider.aclose()
    return RequestCost(vendor, messages, calls, tuple(medians))


def run_request_cost(
    vendors: Sequence[str] = VENDORS,
    lengths: Sequence[int] = LENGTHS,
    calls: int = 100,
    repeats: int = 5,
) -> list[RequestCost]:
    """Each vendor at each length, in that order."""

    async def main() -> list[RequestCost]:
        return [await _measure(v, n, calls, repeats) for v in vendors for n in lengths]

    return anyio.run(main)

"""Before the first byte: how long each vendor adapter's ``stream()`` takes to
hand its request to HTTP, by the conversation's length.

Every turn pays it before the provider can start on its first token, so it adds
to first audio one for one. The adapter is called as the pipeline calls it
(chat mode, a system prompt, the conversation as alternating user and assistant
text messages) and ``httpx2.AsyncClient.send`` — the one transport all three
SDKs use — is replaced for the run by one that notes the time and refuses the
request: what is measured is the adapter's and the SDK's work from the call to
the request's hand-over (building, validating and serialising the body, the
headers, the URL), with no network and nothing of the reply. A call that never
reached the transport fails the run, so a fast figure cannot come from an
adapter that gave up early.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2

from ..formats.base import BuiltRequest, ProviderMessage
from ..providers.anthropic import AnthropicProvider
from ..providers.gemini import GeminiProvider
from ..providers.openai import OpenAIProvider
from ..vocab.messages import ModelConfig, TextContent

VENDORS = ("anthropic", "openai", "gemini")
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
        return statistics.median(self.us), min(self.us), max(self.us)


class _Sent(Exception):
    """The request reached the transport (raised in place of sending it)."""


@contextmanager
def _refusing_transport(sent: list[float]) -> Iterator[None]:
    original = httpx2.AsyncClient.send

    async def refuse(self: httpx2.AsyncClient, request: httpx2.Request, **_: Any) -> Any:
        sent.append(time.perf_counter())
        raise _Sent

    httpx2.AsyncClient.send = refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        httpx2.AsyncClient.send = original  # type: ignore[method-assign]


def conversation(messages: int) -> BuiltRequest:
    """``messages`` alternating user and assistant messages, a user's last."""
    roles = ["user" if (messages - n) % 2 else "assistant" for n in range(messages)]
    body = [ProviderMessage(role, [TextContent(text=MESSAGE)]) for role in roles]  # type: ignore[arg-type]
    return BuiltRequest("chat", body, system=SYSTEM)


def _provider(vendor: str) -> Any:
    # A base URL nobody answers on: nothing is sent (the transport refuses first).
    if vendor == "anthropic":
        return AnthropicProvider(api_key="bench-key", base_url="http://127.0.0.1:9")
    if vendor == "openai":
        return OpenAIProvider(api_key="bench-key", base_url="http://127.0.0.1:9/v1")
    return GeminiProvider(api_key="bench-key", base_url="http://127.0.0.1:9")


async def one_call(provider: Any, built: BuiltRequest, config: ModelConfig) -> float:
    """Seconds from the call to the hand-over."""
    sent: list[float] = []
    with _refusing_transport(sent):
        started = time.perf_counter()
        try:
            async for _ in provider.stream(built, config):
                break
        except _Sent:
            pass
        except Exception as exc:  # an adapter may wrap what the transport raised
            if not any(isinstance(cause, _Sent) for cause in _causes(exc)):
                raise
    if not sent:
        raise RuntimeError(f"{provider.name}: the request never reached the transport")
    return sent[0] - started


def _causes(exc: BaseException) -> Iterator[BaseException]:
    met: set[int] = set()
    seen: BaseException | None = exc
    while seen is not None and id(seen) not in met:
        met.add(id(seen))
        yield seen
        seen = seen.__cause__ or seen.__context__


async def _measure(vendor: str, messages: int, calls: int, repeats: int) -> RequestCost:
    provider = _provider(vendor)
    built, config = conversation(messages), ModelConfig(model="bench-model", max_tokens=300)
    try:
        for _ in range(max(3, calls // 10)):  # warm-up: the SDKs' lazy imports and caches
            await one_call(provider, built, config)
        medians = []
        for _ in range(repeats):
            seconds = [await one_call(provider, built, config) for _ in range(calls)]
            medians.append(round(statistics.median(seconds) * 1e6, 1))
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
        return [
            await _measure(vendor, messages, calls, repeats)
            for vendor in vendors
            for messages in lengths
        ]

    return anyio.run(main)

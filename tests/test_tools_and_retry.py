"""The tool runner (timeouts and failures become error results) and the retry policy."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

import anyio
import pytest

from voice_membrane.membrane.tools import ToolCall, ToolOutput, run_tool_calls, tool_handler
from voice_membrane.vendors.errors import ProviderError
from voice_membrane.vendors.retry import RetryPolicy
from voice_membrane.vocab.messages import ToolResultContent

pytestmark = pytest.mark.anyio
CALLS = [ToolCall("c1", "get_weather", {"city": "Paris"}), ToolCall("c2", "slow", {})]


async def test_results_in_call_order_with_ids_filled_in() -> None:
    async def handler(calls: list[ToolCall]) -> Sequence[ToolOutput]:
        return ["sunny", ToolResultContent(tool_use_id="ignored", content="done")]

    results = await run_tool_calls(CALLS, handler, timeout_s=5)
    assert [(r.tool_use_id, r.content, r.is_error) for r in results] == [
        ("c1", "sunny", False),
        ("c2", "done", False),
    ]


async def test_a_handler_that_times_out_gives_error_results() -> None:
    async def handler(calls: list[ToolCall]) -> Sequence[ToolOutput]:
        await anyio.sleep(10)
        return []

    results = await run_tool_calls(CALLS, handler, timeout_s=0.05)
    assert all(r.is_error and "timed out after 0.05 s" in r.text() for r in results)


async def test_a_handler_that_raises_gives_error_results() -> None:
    async def handler(calls: list[ToolCall]) -> Sequence[ToolOutput]:
        raise KeyError("no such city")

    results = await run_tool_calls(CALLS, handler, timeout_s=5)
    assert all(r.is_error and "KeyError" in r.text() for r in results)


async def test_tool_handler_isolates_each_call() -> None:
    def get_weather(city: str) -> dict[str, object]:
        return {"city": city, "high_c": 21}

    def slow() -> str:
        time.sleep(1)  # blocking: runs in a thread, so the timeout can fire
        return "late"

    async def boom() -> str:
        raise RuntimeError("backend down")

    handler = tool_handler({"get_weather": get_weather, "slow": slow, "boom": boom}, timeout_s=0.1)
    calls = [*CALLS, ToolCall("c3", "boom", {}), ToolCall("c4", "nope", {})]
    results = await run_tool_calls(calls, handler, timeout_s=5)
    assert results[0].content == '{"city": "Paris", "high_c": 21}' and not results[0].is_error
    assert results[1].is_error and "timed out" in results[1].text()
    assert results[2].is_error and "backend down" in results[2].text()
    assert results[3].is_error and "unknown tool 'nope'" in results[3].text()


def test_retry_backoff_doubles_with_jitter_and_honours_retry_after() -> None:
    policy = RetryPolicy(max_retries=3, base_delay_s=0.5, max_delay_s=3, jitter=0.25)
    error = ProviderError("x", "server", "boom", status=500)
    rng = random.Random(1)
    delays = [policy.delay_s(n, error, rng) for n in range(4)]
    for n, delay in enumerate(delays):
        expected = min(0.5 * 2**n, 3)
        assert expected * 0.75 <= delay <= min(expected * 1.25, 3)
    limited = ProviderError("x", "rate_limit", "slow down", status=429, retry_after_s=2.0)
    assert policy.delay_s(0, limited) == 2.0
    assert policy.delay_s(0, ProviderError("x", "rate_limit", "", retry_after_s=60)) == 3
    assert policy.should_retry(2, error) and not policy.should_retry(3, error)
    assert not policy.should_retry(0, ProviderError("x", "bad_request", "no", status=400))

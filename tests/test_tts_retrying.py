"""The TTS retry helper: retried only before the first output, by the LLM half's policy."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio
import pytest

from voice_membrane.tts.base import TtsError
from voice_membrane.tts.retrying import retry_before_output, retry_call
from voice_membrane.vendors.retry import RetryPolicy

FAST = RetryPolicy(max_retries=2, base_delay_s=0.001, max_delay_s=0.001)


def attempts(*plans: list[int | TtsError]) -> tuple[list[int], object]:
    started: list[int] = []
    queue = list(plans)

    async def attempt() -> AsyncGenerator[int, None]:
        started.append(len(started))
        for step in queue.pop(0):
            if isinstance(step, TtsError):
                raise step
            yield step

    return started, attempt


async def collect(attempt: object, policy: RetryPolicy = FAST) -> list[int]:
    return [x async for x in retry_before_output(attempt, policy)]  # type: ignore[arg-type]


def test_a_retryable_error_before_output_is_retried() -> None:
    busy = TtsError("429", retryable=True, retry_after_s=0.001)
    started, attempt = attempts([busy], [busy], [1, 2])
    heard: list[float] = []

    async def main() -> list[int]:
        gen = retry_before_output(attempt, FAST, lambda e, d: heard.append(d))  # type: ignore[arg-type]
        return [x async for x in gen]

    assert anyio.run(main) == [1, 2]
    assert started == [0, 1, 2] and heard == [0.001, 0.001]


def test_retries_run_out_and_the_last_error_is_raised() -> None:
    busy = TtsError("503", retryable=True)
    started, attempt = attempts([busy], [busy], [busy], [1])
    with pytest.raises(TtsError, match="503"):
        anyio.run(collect, attempt)
    assert started == [0, 1, 2]


def test_no_retry_after_output_or_for_a_final_error() -> None:
    dropped = TtsError("dropped", retryable=True)
    started, attempt = attempts([1, dropped], [2])
    with pytest.raises(TtsError, match="dropped"):
        anyio.run(collect, attempt)
    assert started == [0]
    started, attempt = attempts([TtsError("401")], [2])
    with pytest.raises(TtsError, match="401"):
        anyio.run(collect, attempt)
    assert started == [0]


def test_a_call_is_retried_while_it_fails_retryably() -> None:
    outcomes: list[TtsError | str] = [
        TtsError("502", retryable=True),
        TtsError("429", retryable=True, retry_after_s=0.001),
        "ok",
    ]
    calls: list[int] = []

    async def call() -> str:
        calls.append(1)
        outcome = outcomes.pop(0)
        if isinstance(outcome, TtsError):
            raise outcome
        return outcome

    assert anyio.run(retry_call, call, FAST) == "ok"
    assert len(calls) == 3
    outcomes[:] = [TtsError("401"), "ok"]
    with pytest.raises(TtsError, match="401"):
        anyio.run(retry_call, call, FAST)
    assert len(calls) == 4

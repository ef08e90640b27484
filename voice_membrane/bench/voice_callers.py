"""The client process of the voice-over-the-endpoint measurement (``voice_serve``).

``python -m voice_membrane.bench.voice_callers PLAN URL CALLERS SEED`` opens
``CALLERS`` calls (``CallerPlan.route``: protocol-1.1 sessions, ``voice_caller``,
or phone calls on ``/v1/twilio``, ``voice_phone_caller``), says "connected",
waits for a line on stdin, then runs each caller's questions starting at a
random moment within the ramp (``SEED``), each hanging up when done (its CPU
and wall time include the hang-ups), and prints its
``CallerResult`` as one JSON line. It also measures its own event-loop lag and
CPU, so a client that could not keep up is seen, not mistaken for the server.
"""

from __future__ import annotations

import json
import random
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict
from typing import Protocol

import anyio

from ..vocab.audio import Samples
from .load_client import LAG_TICK_S, describe, go_when_told
from .stats import nearest_rank
from .voice_caller import CallerPlan, CallerResult, VoiceCaller, VoiceTurnRecord, read_question


class Caller(Protocol):
    def connected(self) -> AbstractAsyncContextManager[None]:
        """The call, open (it hangs up on leaving)."""

    async def run(self, delay: float) -> None: ...


def caller_for(
    url: str,
    plan: CallerPlan,
    question: Samples,
    result: CallerResult,
    on_turn: Callable[[VoiceTurnRecord], None] | None = None,
) -> Caller:
    if plan.route == "twilio":
        from .voice_phone_caller import PhoneCaller

        return PhoneCaller(url, plan, question, result, on_turn)
    return VoiceCaller(url, plan, question, result)


async def _lag(samples: list[float]) -> None:
    while True:
        start = time.perf_counter()
        await anyio.sleep(LAG_TICK_S)
        samples.append((time.perf_counter() - start - LAG_TICK_S) * 1000)


async def run_callers(
    url: str,
    plan: CallerPlan,
    callers: int,
    seed: int,
    go: Callable[[], Awaitable[None]],
    on_turn: Callable[[VoiceTurnRecord], None] | None = None,
) -> CallerResult:
    """Open ``callers`` calls, wait for ``go``, run them, hang up. Each call lives
    in one task from its opening to its hang-up (a phone call's client holds a
    task group of its own). ``on_turn``: each phone call's question, once done."""
    result = CallerResult()
    question = read_question(plan.question, plan.sample_rate)
    rng = random.Random(seed)
    delays = [rng.uniform(0, plan.ramp_s) for _ in range(callers)]
    waiting = [callers]
    all_open, started = anyio.Event(), anyio.Event()

    def opened() -> None:
        waiting[0] -= 1
        if waiting[0] == 0:
            all_open.set()

    async def call(delay: float) -> None:
        caller = caller_for(url, plan, question, result, on_turn)
        connected = False
        try:
            async with caller.connected():
                connected = True
                opened()
                await started.wait()
                await caller.run(delay)
        except Exception as error:  # counted: this caller makes no call
            if connected:
                raise
            # a refused phone call says its HTTP status; otherwise the error's kind
            refused = type(error).__name__ == "CallRefused"
            result.errors.append(f"connect: {error if refused else describe(error)}")
            opened()

    async with anyio.create_task_group() as group:
        async with anyio.create_task_group() as calls:
            for delay in delays:
                calls.start_soon(call, delay)
            await all_open.wait()
            await go()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            began = time.perf_counter()
            group.start_soon(_lag, result.lag_ms)
            started.set()
        result.wall_s = time.perf_counter() - began
        group.cancel_scope.cancel()
    after = resource.getrusage(resource.RUSAGE_SELF)
    result.cpu_s = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    late = result.send_late_ms
    result.send_late_ms = [nearest_rank(late, q) for q in (0.5, 0.99, 1.0)] if late else []
    return result


async def warm_up_call(url: str, plan: CallerPlan) -> CallerResult:
    """One caller, one question: the server's lazy imports (the detector's model,
    the STT SDK) and its connection pools are then warm."""
    result = CallerResult()
    caller = VoiceCaller(url, plan, read_question(plan.question, plan.sample_rate), result)
    await caller.open()
    single = CallerPlan(**{**asdict(plan), "turns": 1, "think_s": 0.0})
    caller.plan = single
    await caller.run(0.2)
    await caller.close()
    return result


def main(plan: str, url: str, callers: str, seed: str) -> None:
    result = anyio.run(
        run_callers, url, CallerPlan(**json.loads(plan)), int(callers), int(seed), go_when_told
    )
    print(json.dumps(asdict(result)), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])

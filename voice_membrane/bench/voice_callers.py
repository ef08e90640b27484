"""The client process of the voice-over-the-endpoint measurement (``voice_serve``;
the process protocol: ``clients``): callers on ``CallerPlan.route``,
protocol-1.1 sessions (``voice_caller``) or phone calls on ``/v1/twilio``
(``voice_phone_caller``), each hanging up when done."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..vocab.audio import Samples
from .clients import Go, Session, client_main, run_sessions
from .stats import nearest_rank
from .voice_caller import CallerPlan, CallerResult, VoiceCaller, VoiceTurnRecord, read_question


def caller_for(
    url: str,
    plan: CallerPlan,
    question: Samples,
    result: CallerResult,
    on_turn: Callable[[VoiceTurnRecord], None] | None = None,
) -> Session:
    if plan.route == "twilio":
        from .voice_phone_caller import PhoneCaller

        return PhoneCaller(url, plan, question, result, on_turn)
    return VoiceCaller(url, plan, question, result)


async def run_callers(
    url: str,
    plan: CallerPlan,
    callers: int,
    seed: int,
    go: Go,
    on_turn: Callable[[VoiceTurnRecord], None] | None = None,
) -> CallerResult:
    """Open ``callers`` calls, wait for ``go``, run them, hang up; ``on_turn``:
    each phone call's question, once done. The frames' send lateness is kept
    as its p50, p99 and max."""
    result = CallerResult()
    question = read_question(plan.question, plan.sample_rate)
    calls = [caller_for(url, plan, question, result, on_turn) for _ in range(callers)]
    await run_sessions(calls, plan.ramp_s, seed, result, go)
    late = result.send_late_ms
    result.send_late_ms = [nearest_rank(late, q) for q in (0.5, 0.99, 1.0)] if late else []
    return result


async def warm_up_call(url: str, plan: CallerPlan) -> CallerResult:
    """One caller, one question: the server's lazy imports (the detector's model,
    the STT SDK) and its connection pools are then warm."""
    result = CallerResult()
    single = replace(plan, turns=1, think_s=0.0)
    caller = VoiceCaller(url, single, read_question(plan.question, plan.sample_rate), result)
    async with caller.connected():
        await caller.run(0.2)
    return result


if __name__ == "__main__":
    client_main(CallerPlan, run_callers)

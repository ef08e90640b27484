"""The bench's phone caller: an interruption the server hears only once the
answer has played out gets no ``clear`` (nothing is left to clear); the caller
says so instead of waiting for one until the turn times out."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from voice_membrane.bench.voice_caller import CallerPlan, CallerResult, VoiceTurnRecord
from voice_membrane.bench.voice_phone_caller import NOT_CLEARED, PhoneCaller
from voice_membrane.testing.fake_twilio import FakeTwilioCall, ReceivedMedia, Spoken

LISTENING = Path(__file__).resolve().parent.parent / "audio_fixtures" / "listening"


class _LateServerCall(FakeTwilioCall):
    """A call whose server answers the question (1 s of audio) and never clears."""

    async def say(self, audio: Any, sample_rate: int = 8000, **_: Any) -> Spoken:
        now = time.perf_counter()
        if not self.media:
            self.media.append(ReceivedMedia(now, now, np.zeros(8000, np.int16)))
        return Spoken(now, now, now, now)


def test_an_interruption_heard_after_the_answer_is_no_clear_not_a_timeout() -> None:
    plan = CallerPlan(
        question=str(LISTENING / "weather.wav"),
        voiced_end=16000,
        sample_rate=16000,
        frame_ms=20,
        output_rate=24000,
        turns=1,
        ramp_s=0.0,
        think_s=0.0,
        turn_timeout_s=10.0,
        route="twilio",
        interrupt=str(LISTENING / "stop.wav"),
        interrupt_after_s=0.1,
    )
    result = CallerResult()
    caller = PhoneCaller("ws://127.0.0.1:1", plan, np.zeros(32000, np.int16), result)
    call = _LateServerCall(None, "MZ1", "CA1", "AC1")  # type: ignore[arg-type]
    caller._call = call
    record = VoiceTurnRecord(1)

    async def ask() -> None:
        with anyio.fail_after(plan.turn_timeout_s):
            await caller._ask(record)

    anyio.run(ask)
    assert record.errors == [NOT_CLEARED]
    assert record.barge_in_ms is None

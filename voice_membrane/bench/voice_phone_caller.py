"""A caller on the phone route (``/v1/twilio``) for the voice-over-the-endpoint
measurement (``voice_serve``): the fake Twilio caller (``testing.fake_twilio``:
20 ms μ-law 8 kHz ``media`` in real time, marks echoed once played, ``clear``
obeyed) saying the same question, recorded as ``voice_caller``'s callers are.

The question is said up to its last voiced sample (the rest is the silence
that follows anyway), so the caller's ``Spoken.end`` — when it was captured,
as a microphone dates it: its frame's send less the padding after it — dates
the speech end; the interruption is said from its first voiced sample, so
``Spoken.onset`` (its frame's send less the frame) dates its onset. Twilio carries no
events: *voice to voice* is the first ``media`` after the speech end, the
answer has played once no ``media`` came for ``QUIET_S`` and the phone's
queue ran out, and *barge-in* is the first ``clear`` after the onset (none
by the time the answer has played out: the turn's error says so, rather than
a timeout).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import AsyncIterator, Callable

import anyio

from ..testing.fake_twilio import CallEnded, FakeTwilioCall, twilio_call
from ..testing.fake_twilio_audio import RATE
from ..vocab.audio import Samples
from .voice_caller import CallerPlan, CallerResult, VoiceTurnRecord, read_question

ROUTE = "/v1/twilio"
QUIET_S = 0.8  # no media for this long after the queue played out: the answer is over
CHECK_S = 0.1  # how often a wait for a clear looks whether the answer is over
NOT_CLEARED = "no clear: the answer played out before the interruption was heard"


class PhoneCaller:
    def __init__(
        self,
        url: str,
        plan: CallerPlan,
        question: Samples,
        result: CallerResult,
        on_turn: Callable[[VoiceTurnRecord], None] | None = None,
    ):
        self.url, self.plan, self.result = url, plan, result
        self.on_turn = on_turn  # told of each question once it is done (progress)
        self.question = question[: plan.voiced_end + 1]
        self.interrupt = (
            None
            if plan.interrupt is None
            else read_question(plan.interrupt, plan.sample_rate)[plan.interrupt_onset :]
        )
        self._call: FakeTwilioCall | None = None

    @contextlib.asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        # Signed as Twilio signs, when the server's auth token is in the environment,
        # for the public URL serve checks (``--twilio-sign-url``) if it is not ours.
        token = os.environ.get("TWILIO_AUTH_TOKEN") or None
        url, public = self.url + ROUTE, self.plan.sign_url
        async with twilio_call(url, auth_token=token, signed_url=public) as call:
            self._call = call
            yield
        # (the fake hung up on leaving: stop, then close)
        if call.close_code not in (1000, None):
            self.result.errors.append(f"closed {call.close_code}")

    async def run(self, delay: float) -> None:
        await anyio.sleep(delay)
        for number in range(1, self.plan.turns + 1):
            record = VoiceTurnRecord(number, call=self.call.call_sid)
            self.result.turns.append(record)
            try:
                if not await self._question(record):
                    return
            finally:
                if self.on_turn is not None:
                    self.on_turn(record)
            await anyio.sleep(self.plan.think_s)

    async def _question(self, record: VoiceTurnRecord) -> bool:
        """One question asked and answered; False if the call cannot go on."""
        try:
            with anyio.fail_after(self.plan.turn_timeout_s):
                await self._ask(record)
        except TimeoutError:
            record.errors.append("no answer in time" if record.voice_to_voice_ms is None
                                 else "timeout")  # fmt: skip
            return False
        except CallEnded:
            pass
        if self.call.close_code is not None:
            record.errors.append(f"closed {self.call.close_code}")
            return False
        return True

    @property
    def call(self) -> FakeTwilioCall:
        assert self._call is not None
        return self._call

    async def _ask(self, record: VoiceTurnRecord) -> None:
        call, rate = self.call, self.plan.sample_rate
        spoken = await call.say(self.question, rate)
        first = await self._first(lambda: call.first_media_after(spoken.ended))
        record.voice_to_voice_ms = round((first - spoken.end) * 1000, 3)
        if self.interrupt is not None:
            await anyio.sleep(max(0.0, first + self.plan.interrupt_after_s - time.perf_counter()))
            if self._played_out():
                record.errors.append("the answer ended before the interruption")
                return
            stop = await call.say(self.interrupt, rate)
            cleared = await self._clear_after(stop.started)
            if cleared is None:  # heard too late to clear: a server behind real time
                record.errors.append(NOT_CLEARED)
                return
            record.barge_in_ms = round((cleared - stop.onset) * 1000, 3)
            record.barge_in.append("clear")
            await self._first(lambda: call.first_media_after(max(cleared, stop.ended)))
        await self._played()
        received = call.media_after(spoken.ended)
        record.audio_s = sum(len(m.samples) for m in received) / RATE

    async def _first(self, when: Callable[[], float | None]) -> float:
        """The time ``when`` gives, once it gives one (``CallEnded`` if the call ends)."""
        await self.call.wait_for(lambda: when() is not None, self.plan.turn_timeout_s)
        at = when()
        if at is None:
            raise CallEnded(f"closed {self.call.close_code}")
        return at

    async def _clear_after(self, t: float) -> float | None:
        """When the first ``clear`` after ``t`` came; None if the answer (and any
        that followed) played out first, with none: the server heard the
        interruption only once there was nothing left to clear (it answers it
        as a question), so waiting for one would only time out."""
        call = self.call
        while call.close_code is None:
            cleared = call.first_clear_after(t)
            if cleared is not None:
                return cleared
            last = call.media[-1]
            quiet_from = max(last.starts + len(last.samples) / RATE, last.arrived)
            if time.perf_counter() >= quiet_from + QUIET_S:
                return None
            with anyio.move_on_after(CHECK_S):
                await call.wait_for(lambda: call.first_clear_after(t) is not None, math.inf)
        raise CallEnded(f"closed {call.close_code}")

    def _played_out(self) -> bool:
        last = self.call.media[-1]
        return time.perf_counter() >= last.starts + len(last.samples) / RATE

    async def _played(self) -> None:
        """Until the answer has played and no more came for ``QUIET_S``."""
        call = self.call
        while call.close_code is None:
            last = call.media[-1]
            ends = last.starts + len(last.samples) / RATE
            now = time.perf_counter()
            if now >= ends + QUIET_S and now >= last.arrived + QUIET_S:
                return
            await anyio.sleep(max(ends, last.arrived) + QUIET_S - now)

"""A phone call whose caller's microphone hears the answer back (the fake
caller's ``PlayedEcho``: -10 dB, 150 ms later), on a pipeline with ``[sink]
echo_canceller = "webrtc"``: ``serve`` cancels that echo
with what it sends as the reference (``TwilioSink.on_sent``), so the answer
never clears itself, and a caller who says "stop" half a second into it (in
what used to be the 3 s echo warm-up) clears it. Without the canceller, with
every sound over the answer taken as the caller's, its own echo clears it.
Real sockets; deadlines are hang guards only."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from serve_helpers import LONG_REPLY, listening_pipeline
from test_serve_twilio import GUARD_S, QUESTION, STOP, answer_heard, call_url, events

from voice_membrane.server import Server
from voice_membrane.testing.echo_room import PlayedEcho
from voice_membrane.testing.fake_twilio import twilio_call

pytest.importorskip("pocketsphinx")

ANSWER_S = 5.0  # of the answer heard over its own echo


def _pipeline(folder: Path, cancel: bool) -> Path:
    """Calls are cancelled when the pipeline asks (``webrtc``; ``auto`` leaves
    them: most phones cancel their own echo)."""
    path = listening_pipeline(folder, "long", LONG_REPLY)
    if cancel:
        path.write_text(path.read_text().replace("[sink]\n", '[sink]\necho_canceller = "webrtc"\n'))
    else:  # the control: no canceller, yet every sound over the answer the caller's
        path.write_text(path.read_text() + '\n[endpoint]\necho = "aec"\necho_warmup_s = 0.0\n')
    return path


async def _clears_over_the_answer(folder: Path, cancel: bool, say_stop: bool) -> tuple[int, int]:
    """Clears while the answer played over its echo, then after "stop" (if said)."""
    lines: list[object] = []
    log = lambda event, **fields: lines.append((event, fields))  # noqa: E731
    async with Server([_pipeline(folder, cancel)], port=0, log=log) as server:
        with anyio.fail_after(GUARD_S):
            echo = PlayedEcho(-10.0, 0.15, 8000)
            async with twilio_call(
                call_url(server), parameters={"pipeline": "long"}, echo=echo
            ) as call:
                await anyio.sleep(0.5)
                question = await call.say(QUESTION, silence_after_s=0.3)
                first = await answer_heard(call, question.ended, 0.5)
                if not say_stop:
                    await anyio.sleep(first + ANSWER_S - time.perf_counter())
                    return len(call.clears), 0
                await anyio.sleep(first + 0.5 - time.perf_counter())
                before = len(call.clears)
                onset = time.perf_counter()
                await call.say(STOP)
                await call.wait_for(lambda: call.first_clear_after(onset) is not None, GUARD_S)
                await call.wait_for(lambda: bool(events(lines, "barge_in")), GUARD_S)  # type: ignore[arg-type]
                first_action = events(lines, "barge_in")[0]["action"]  # type: ignore[arg-type]
                assert first_action == "pause"  # by its sound, before any word of it
                return before, len(call.clears) - before


@pytest.mark.anyio
async def test_the_answers_echo_on_a_call_does_not_clear_it(tmp_path: Path) -> None:
    clears, _ = await _clears_over_the_answer(tmp_path, cancel=True, say_stop=False)
    assert clears == 0


@pytest.mark.anyio
async def test_without_the_canceller_the_echo_clears_it(tmp_path: Path) -> None:
    clears, _ = await _clears_over_the_answer(tmp_path, cancel=False, say_stop=False)
    assert clears > 0


@pytest.mark.anyio
async def test_stop_half_a_second_into_the_answer_clears_it(tmp_path: Path) -> None:
    before, after = await _clears_over_the_answer(tmp_path, cancel=True, say_stop=True)
    assert (before, after) >= (0, 1) and before == 0

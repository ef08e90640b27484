"""Voice to voice over the served endpoint: callers speaking a recorded question
in real time to one ``voice-membrane serve`` process (protocol 1.1), at 1 and
at 50 at once, against cloud fakes of fixed service times; measured by
``voice_membrane.bench.voice_serve`` (its docstring has the method).

``python -m benchmarks.voice_serve [CALLERS…] [--phone CALLERS…]
[--phone-barge CALLERS…] [--barge CALLERS…] [--workers N] [--json]`` runs it
alone (only the sizes given, each with ``serve --workers N``, else the default
ones) and prints its section (and its figures as JSON).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks.scenario import Scenario
from benchmarks.serve_load import DELTA_CHARS, LLM_TTFT_S, PACE, TOKEN_S, TTS_TTFB_S
from benchmarks.voice_serve_report import VOICE_SERVE_TITLE, voice_serve_section
from voice_membrane.bench.serve_load import LoadScript
from voice_membrane.bench.voice_caller import CallerPlan
from voice_membrane.bench.voice_serve import (
    Level,
    VoiceServeResults,
    VoiceServeSetup,
    run_voice_serve,
)

LEVELS = (1, 50)  # on /v1/session (protocol 1.1)
PHONE_LEVELS = (1, 50)  # on /v1/twilio (the fake Twilio caller)
PHONE_BARGE_LEVELS = (1, 50)  # a phone call, its answers interrupted
# Sizes run again on both routes with serve --workers 2: what a cloud pipeline
# gets by default on this 2-core machine (--workers auto: one per core).
TWO_WORKER_LEVELS = (50,)
TURNS = 3
PHONE_TURNS = 2
# One caller's figures are its own turns only: more of them, so a p50 within a
# few ms of a 20 ms target is not two or three calls' luck.
SOLO_TURNS = 8
SOLO_PHONE_TURNS = 5
LISTENING = Path(__file__).resolve().parent.parent / "audio_fixtures" / "listening"
QUESTION = LISTENING / "weather.wav"
INTERRUPT = LISTENING / "stop.wav"  # said into each answer in the barge-in levels
# After the endpointer's 3 s echo warm-up (echo_warmup_s), in which speech alone
# does not pause the reply (words do, after the STT's first result).
INTERRUPT_AFTER_S = 3.5
BARGE_TURNS = 2
QUESTION_TEXT = "What is the weather like in Paris today?"
FINALIZE_S = 0.15  # the fake Deepgram's answer to Finalize (as voice_scripted's)
END_SILENCE_S = 0.6  # the shipped [endpoint] end_silence_s
# The fakes' service times are the serve load's; the reply ~6 s of speech, long
# enough to be interrupted after the echo warm-up.
REPLY = (
    "The weather stays mild and dry today, with a light breeze from the west "
    "and sunny spells in the afternoon."
)
SAMPLE_RATE = 16000
FRAME_MS = 20
OUTPUT_RATE = 24000
OUTPUT_FRAME_MS = 60  # the reply's frames on /v1/session, as the page asks (protocol 1.2)
RAMP_S = 2.0  # first questions staggered over it
THINK_S = 0.5
TURN_TIMEOUT_S = 30.0  # a barge-in question waits for the answer to its "stop" too
CALLERS_PER_CLIENT = 25  # a client process sends 50 frames/s per caller


def run_voice_serve_bench(
    levels: tuple[int, ...] = LEVELS,
    phone_levels: tuple[int, ...] = PHONE_LEVELS,
    phone_barge_levels: tuple[int, ...] = PHONE_BARGE_LEVELS,
    barge_levels: tuple[int, ...] = (),  # /v1/session, its answers interrupted
    two_worker_levels: tuple[int, ...] = TWO_WORKER_LEVELS,
    workers: int = 1,  # for every size above
    turns: int = TURNS,
    phone_turns: int = PHONE_TURNS,
    barge_turns: int = BARGE_TURNS,
    ramp_s: float = RAMP_S,
    log: Callable[[str], None] = print,
) -> VoiceServeResults:
    setup = voice_serve_setup(turns, barge_turns, ramp_s)

    def solo(n: int, default: int, solo_turns: int) -> int:
        return max(default, solo_turns) if n == 1 else default

    runs = [
        *(Level(n, turns=solo(n, turns, SOLO_TURNS), workers=workers) for n in levels),
        *(Level(n, workers=2) for n in two_worker_levels),
        *(
            Level(n, "twilio", turns=solo(n, phone_turns, SOLO_PHONE_TURNS), workers=workers)
            for n in phone_levels
        ),
        *(Level(n, "twilio", turns=phone_turns, workers=2) for n in two_worker_levels),
        *(Level(n, barge=True, workers=workers) for n in barge_levels),
        *(Level(n, "twilio", barge=True, workers=workers) for n in phone_barge_levels),
    ]
    return run_voice_serve(setup, runs, log)


def voice_serve_setup(
    turns: int = TURNS, barge_turns: int = BARGE_TURNS, ramp_s: float = RAMP_S
) -> VoiceServeSetup:
    """The benchmark's fakes, question and callers' plan."""
    reply = LoadScript(REPLY, LLM_TTFT_S, TOKEN_S, DELTA_CHARS, TTS_TTFB_S, PACE)
    plan = CallerPlan(
        question=str(QUESTION),
        voiced_end=0,  # found from the question's level
        sample_rate=SAMPLE_RATE,
        frame_ms=FRAME_MS,
        output_rate=OUTPUT_RATE,
        turns=turns,
        ramp_s=ramp_s,
        think_s=THINK_S,
        turn_timeout_s=TURN_TIMEOUT_S,
        interrupt_after_s=INTERRUPT_AFTER_S,
        output_frame_ms=OUTPUT_FRAME_MS,
    )
    return VoiceServeSetup(
        reply,
        str(QUESTION),
        QUESTION_TEXT,
        FINALIZE_S,
        END_SILENCE_S,
        plan,
        CALLERS_PER_CLIENT,
        str(INTERRUPT),
        barge_turns,
    )


SCENARIO = Scenario(
    "voice-serve",
    (VOICE_SERVE_TITLE,),
    run_voice_serve_bench,
    lambda r: [voice_serve_section(r)],
    True,
    (ImportError, RuntimeError),  # RuntimeError: the server did not start
)


if __name__ == "__main__":
    import json

    # [CALLERS…] [--phone CALLERS…] [--phone-barge CALLERS…] [--barge CALLERS…] [--workers N]
    groups: dict[str, list[int]] = {}
    group = "levels"
    for arg in sys.argv[1:]:
        if arg.startswith("--") and arg != "--json":
            group = arg[2:].replace("-", "_")
        elif arg.isdigit():
            groups.setdefault(group, []).append(int(arg))
    workers = groups.pop("workers", [1])[-1]
    chosen: dict[str, object] = {
        {"phone": "phone_levels", "phone_barge": "phone_barge_levels", "barge": "barge_levels"}.get(
            name, name
        ): tuple(values)
        for name, values in groups.items()
    }
    if chosen:  # only what was asked for
        empty = ("levels", "phone_levels", "phone_barge_levels", "two_worker_levels")
        chosen = {**dict.fromkeys(empty, ()), **chosen}
    results = run_voice_serve_bench(**chosen, workers=workers)  # type: ignore[arg-type]
    print(voice_serve_section(results))
    if "--json" in sys.argv:
        print(json.dumps(results.summary(), indent=1))

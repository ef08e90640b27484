"""Barge-in by voice: a live user speaks over the reply ("mm-hm", then "stop")
through the real loop, in real time (``voice_membrane/bench/bargein.py``); and
the same over the reply's own echo, replayed offline through the echo canceller
(``voice_membrane/bench/echo_bargein.py``). The method: ``sections/bargein.md``.

``python -m benchmarks.bargein [ROUNDS]`` runs the live one alone and
prints it; ``python -m benchmarks.bargein echo [ANSWERS USERS]`` the echo one.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

from benchmarks.prose import prose, title
from benchmarks.scenario import Scenario
from benchmarks.table import Column, Table
from voice_membrane.bench.bargein import CLIPS, BargeInRun, Trial, run_bargein
from voice_membrane.bench.echo_bargein import EchoRun, run_echo
from voice_membrane.bench.stats import Spread
from voice_membrane.bench.voice_command import LOCAL_VOICE
from voice_membrane.pipeline.config import load_pipeline

BARGEIN_TITLE, ECHO_TITLE = title("bargein"), title("bargein#echo")
ROUNDS = 10
MS = Spread(("p50", "p95", "max"))


def run_bargein_bench(rounds: int = ROUNDS) -> BargeInRun:
    with tempfile.TemporaryDirectory() as folder:
        return anyio.run(run_bargein, load_pipeline(LOCAL_VOICE), Path(folder), rounds)


def run_echo_bench(answers_per_path: int = 50, users_per_path: int = 3) -> EchoRun:
    return run_echo(answers_per_path, users_per_path)


CLIP_TABLE = Table[tuple[str, list[Trial]]](  # a clip, its trials
    [
        Column("Said over the reply", lambda r: f"`{r[0]}.wav`"),
        Column("must", lambda r: CLIPS[r[0]][1]),
        Column("trials", lambda r: len(r[1])),
        Column("as it must", lambda r: sum(t.right for t in r[1])),
        Column("paused", lambda r: MS.cell([t.pause_ms for t in r[1] if t.pause_ms is not None])),
        Column("ended", lambda r: MS.cell([t.end_ms for t in r[1] if t.end_ms is not None])),
    ]
)


def bargein_section(run: BargeInRun) -> str:
    clips = [(clip, [t for t in run.trials if t.clip == clip]) for clip in CLIPS]
    s = run.summary()  # (its seconds rounded as the run reports them)
    return prose(
        "bargein", seconds=s["seconds"], skipped=s["skipped"], table=CLIP_TABLE.render(clips)
    )


_SETUPS = {
    "canceller": "WebRTC canceller",
    "headphones": "WebRTC canceller, no echo (headphones)",
    "level": "level judge, no canceller",
}
ANSWERS = Table[tuple[tuple[float, int], tuple[int, int]]](  # (gain, delay), (answers, pauses)
    [
        Column("echo", lambda r: f"{r[0][0]:+.0f} dB"),
        Column("delay", lambda r: f"{r[0][1]} ms"),
        Column("answers", lambda r: r[1][0]),
        Column("self-interruptions", lambda r: r[1][1]),
    ]
)
LATENCY = Table[tuple[tuple[str, float], list[float | None]]](  # (setup, at s), latencies
    [
        Column("setup", lambda r: _SETUPS[r[0][0]]),
        Column("user speaks at", lambda r: f"{r[0][1]:g} s"),
        Column("paused", lambda r: f"{sum(v is not None for v in r[1])} of {len(r[1])}"),
        Column(
            "onset → paused ms p50 / p95 / max",
            lambda r: MS.cell([v for v in r[1] if v is not None]),
        ),
    ]
)


def echo_section(run: EchoRun) -> str:
    return prose(
        "bargein#echo",
        seconds=run.seconds,
        answers=ANSWERS.render(run.answers.items()),
        latency=LATENCY.render(run.latency.items()),
    )


SCENARIO = Scenario(
    "bargein",
    (BARGEIN_TITLE, ECHO_TITLE),
    lambda: (run_bargein_bench(), run_echo_bench()),
    lambda r: [bargein_section(r[0]), echo_section(r[1])],
    True,
)


if __name__ == "__main__":
    if sys.argv[1:2] == ["echo"]:
        print(echo_section(run_echo_bench(*(int(a) for a in sys.argv[2:4]))))
    else:
        print(bargein_section(run_bargein_bench(int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS)))

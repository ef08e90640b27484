"""Barge-in by voice: a live user speaks over the reply ("mm-hm", then "stop")
through the real loop, in real time (``voice_membrane/bench/bargein.py``).

And the same over the reply's own echo, replayed offline through the echo
canceller (``voice_membrane/bench/echo_bargein.py``): self-interruptions and
the pause's latency at 0.5, 1.5 and 4 s into the answer.

``python -m benchmarks.bench_bargein [ROUNDS]`` runs the live one alone and
prints it; ``python -m benchmarks.bench_bargein echo [ANSWERS USERS]`` the echo one.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

from benchmarks.report_bargein import BARGEIN_TITLE, ECHO_TITLE, bargein_section, echo_section
from benchmarks.scenario import Scenario
from voice_membrane.bench.bargein import BargeInRun, run_bargein
from voice_membrane.bench.echo_bargein import EchoRun, run_echo
from voice_membrane.bench.voice_command import LOCAL_VOICE
from voice_membrane.pipeline.config import load_pipeline

ROUNDS = 10


def run_bargein_bench(rounds: int = ROUNDS) -> BargeInRun:
    base = load_pipeline(LOCAL_VOICE)
    with tempfile.TemporaryDirectory() as folder:
        return anyio.run(run_bargein, base, Path(folder), rounds)


def run_echo_bench(answers_per_path: int = 50, users_per_path: int = 3) -> EchoRun:
    """The reply's echo replayed offline through the canceller (``echo_bargein``)."""
    return run_echo(answers_per_path, users_per_path)


def _measure() -> tuple[BargeInRun, EchoRun]:
    return run_bargein_bench(), run_echo_bench()


SCENARIO = Scenario(
    "bargein",
    (BARGEIN_TITLE, ECHO_TITLE),
    _measure,
    lambda r: [bargein_section(r[0]), echo_section(r[1])],
    True,
)


if __name__ == "__main__":
    if sys.argv[1:2] == ["echo"]:
        print(echo_section(run_echo_bench(*(int(a) for a in sys.argv[2:4]))))
    else:
        print(bargein_section(run_bargein_bench(int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS)))

"""Barge-in by voice: a live user speaks over the reply ("mm-hm", then "stop")
through the real loop, in real time (``voice_membrane/bench/bargein.py``).

``python -m benchmarks.bench_bargein [ROUNDS]`` runs it alone and prints it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

from voice_membrane.bench.bargein import BargeInRun, run_bargein
from voice_membrane.bench.voice_command import LOCAL_VOICE
from voice_membrane.pipeline.config import load_pipeline

ROUNDS = 10


def run_bargein_bench(rounds: int = ROUNDS) -> BargeInRun:
    base = load_pipeline(LOCAL_VOICE)
    with tempfile.TemporaryDirectory() as folder:
        return anyio.run(run_bargein, base, Path(folder), rounds)


if __name__ == "__main__":
    from benchmarks.report_bargein import bargein_section

    print(bargein_section(run_bargein_bench(int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS)))

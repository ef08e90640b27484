"""Cloud TTS benchmark: what our engine code adds over the raw protocol, measured by
``voice_membrane.bench.tts_overhead`` (its docstring has the method) against the
speech fakes answering after ``TTFB_S``, on a recorded reply whose first delta comes
after ``LLM_FIRST_DELTA_S``; ``TURNS`` turns per engine after ``WARMUP``.

``python -m benchmarks.bench_tts_engines`` runs it alone and prints its figures.
"""

from __future__ import annotations

from collections.abc import Callable

from voice_membrane.bench.tts_overhead import TtsOverheadResults, TtsSetup, run_tts_overhead

TTFB_S = 0.1
LLM_FIRST_DELTA_S = 0.15
DELTA_S = 0.02
TURNS = 20
WARMUP = 2
REPLY = (
    "The weather stays mild and dry today, with a light breeze in the afternoon "
    "and clear skies by evening."
)
ENGINES = ("elevenlabs", "elevenlabs-http", "openai")


def run_tts_engines_bench(
    engines: tuple[str, ...] = ENGINES,
    turns: int = TURNS,
    warmup: int = WARMUP,
    log: Callable[[str], None] = print,
) -> TtsOverheadResults:
    setup = TtsSetup(TTFB_S, LLM_FIRST_DELTA_S, DELTA_S, REPLY, turns, warmup)
    return run_tts_overhead(setup, engines, log)


if __name__ == "__main__":
    for r in run_tts_engines_bench().results:
        print(
            r.engine,
            repr(r.first_piece),
            "raw",
            r.p50_p95(r.raw_ms),
            "pipeline",
            r.p50_p95(r.pipeline_ms),
            "added",
            r.p50_p95(r.added_ms()),
            "errors",
            r.errors[:2],
        )

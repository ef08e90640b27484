"""Cloud TTS benchmark: what our engine code adds over the raw protocol, measured by
``voice_membrane.bench.tts_overhead`` (its docstring has the method) against the
speech fakes answering after ``TTFB_S``, on a recorded reply whose first delta comes
after ``LLM_FIRST_DELTA_S``; ``TURNS`` turns per engine after ``WARMUP``. Its
report section's words are ``sections/tts.md``.

``python -m benchmarks.tts`` runs it alone and prints its section.
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.prose import prose, title
from benchmarks.scenario import Scenario
from benchmarks.table import Column, Table, quoted
from voice_membrane.bench.stats import Spread, median
from voice_membrane.bench.tts_overhead import (
    EngineResult,
    TtsOverheadResults,
    TtsSetup,
    run_tts_overhead,
)

TTS_TITLE = title("tts")
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
TARGET_ADDED_MS = 5.0
SPREAD = Spread(("median", "p95"), digits=1)  # p50: the median, as the target takes it
SIGNED = Spread(("median", "p95"), digits=1, signed=True)


def run_tts_engines_bench(
    engines: tuple[str, ...] = ENGINES,
    turns: int = TURNS,
    warmup: int = WARMUP,
    log: Callable[[str], None] = print,
) -> TtsOverheadResults:
    setup = TtsSetup(TTFB_S, LLM_FIRST_DELTA_S, DELTA_S, REPLY, turns, warmup)
    return run_tts_overhead(setup, engines, log)


def _met(result: EngineResult) -> str:
    added = result.added_ms()
    if not added:
        return "—"
    return "yes" if median(added) <= TARGET_ADDED_MS else "**no**"


TABLE: Table[EngineResult] = Table(
    [
        Column("Engine", lambda r: f"`{r.engine}`"),
        Column("raw", lambda r: SPREAD.cell(r.raw_ms)),
        Column("engine first byte", lambda r: SPREAD.cell(r.engine_first_byte_ms)),
        Column("pipeline", lambda r: SPREAD.cell(r.pipeline_ms)),
        Column("added", lambda r: SIGNED.cell(r.added_ms())),
        Column(f"≤ {TARGET_ADDED_MS:g} ms at p50", _met),
        Column("turns", lambda r: len(r.pipeline_ms)),
        Column("errors", lambda r: len(r.errors)),
    ]
)


def tts_section(results: TtsOverheadResults) -> str:
    setup, engines = results.setup, results.results
    return prose(
        "tts",
        results=results,
        setup=setup,
        ttfb_ms=setup.ttfb_s * 1000,
        first_delta_ms=setup.llm_first_delta_s * 1000,
        target_ms=TARGET_ADDED_MS,
        table=TABLE.render(engines),
        pieces=", ".join(f"{r.engine} {quoted(r.first_piece)}" for r in engines if r.first_piece),
    )


SCENARIO = Scenario("tts", (TTS_TITLE,), run_tts_engines_bench, lambda r: [tts_section(r)])

if __name__ == "__main__":
    print(tts_section(run_tts_engines_bench()))

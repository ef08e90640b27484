"""The cloud TTS section of the benchmark report (``benchmarks.bench_tts_engines``)."""

from __future__ import annotations

from benchmarks.bench_tts_engines import run_tts_engines_bench
from benchmarks.scenario import Scenario
from benchmarks.table import quoted, table
from voice_membrane.bench.tts_overhead import EngineResult, TtsOverheadResults

TTS_TITLE = "Cloud TTS: what our engine code adds over the raw protocol"
TARGET_ADDED_MS = 5.0


def _p(values: list[float], signed: bool = False) -> str:
    figures = EngineResult.p50_p95(values)
    if figures is None:
        return "—"
    sign = "+" if signed else ""
    return f"{figures[0]:{sign}.1f} / {figures[1]:{sign}.1f}"


def _met(result: EngineResult) -> str:
    figures = EngineResult.p50_p95(result.added_ms())
    if figures is None:
        return "—"
    return "yes" if figures[0] <= TARGET_ADDED_MS else "**no**"


def tts_section(results: TtsOverheadResults) -> str:
    rows = [
        [
            f"`{r.engine}`",
            _p(r.raw_ms),
            _p(r.engine_first_byte_ms),
            _p(r.pipeline_ms),
            _p(r.added_ms(), signed=True),
            _met(r),
            len(r.pipeline_ms),
            len(r.errors),
        ]
        for r in results.results
    ]
    pieces = ", ".join(
        f"{r.engine} {quoted(r.first_piece)}" for r in results.results if r.first_piece
    )
    ttfb_ms = f"{results.setup.ttfb_s * 1000:.0f}"
    first_delta_ms = f"{results.setup.llm_first_delta_s * 1000:.0f}"
    method = (
        f"Each engine against its fake server (child process) answering after a fixed "
        f"{ttfb_ms} ms time to first byte; {results.setup.turns} turns per engine after "
        f"{results.setup.warmup} warm-up turns. ms, p50 / p95. *Raw*: a bare client of the "
        "wire protocol (`websockets`, compression off as the engine has it, on a "
        "socket opened as a turn's is: the first piece sent with `flush`, until the "
        "first audio message; `httpx` on a kept-alive connection: "
        "request sent, until the first body bytes). *Engine first byte*: the same, as "
        "the pipeline measured it for the first piece (from when the piece was handed "
        "to the engine). *Pipeline*: a whole turn's first audio (the null sink's first "
        "write) minus the arrival of the LLM delta that completed the first piece; a "
        f"recorded reply whose first delta comes after {first_delta_ms} ms (the socket "
        "is open by then, as with a real model). *Added*: pipeline minus the raw "
        f"median, per turn; target ≤ {TARGET_ADDED_MS:g} ms at p50."
    )
    return "\n\n".join(
        [
            f"## {TTS_TITLE}",
            method,
            table(
                [
                    "Engine",
                    "raw",
                    "engine first byte",
                    "pipeline",
                    "added",
                    "≤ 5 ms at p50",
                    "turns",
                    "errors",
                ],
                rows,
            ),
            f"First pieces: {pieces}. The benchmark took {results.seconds:.0f} s.",
        ]
    )


SCENARIO = Scenario("tts", (TTS_TITLE,), run_tts_engines_bench, lambda r: [tts_section(r)])

"""The long-session section of the benchmark report (``benchmarks.bench_long_session``)."""

from __future__ import annotations

from benchmarks.bench_long_session import LongSessionResults, ModeRun, run_long_session_bench
from benchmarks.scenario import Scenario
from benchmarks.table import table
from voice_membrane.bench.stats import median

LONG_SESSION_TITLE = "Long embedded session: first token of trimmed turns"


def _ms(values: list[float]) -> str:
    return f"{median(values):.0f} / {max(values):.0f}" if values else "—"


def _tokens(values: list[int]) -> str:
    return f"{median([float(v) for v in values]):.0f}" if values else "—"


def _row(run: ModeRun) -> list[object]:
    mode = "trimmed in place" if run.in_place else "read again (old path)"
    return [
        mode,
        _ms(run.first_token_ms(False)),
        _ms(run.first_token_ms(True)),
        len(run.first_token_ms(True)),
        _tokens(run.evaluated(True)),
        f"{run.seconds:.0f} s",
    ]


def long_session_section(results: LongSessionResults) -> str:
    method = (
        f"One session on the embedded SmolLM2 (n_ctx 2048, greedy replies of at most "
        f"{results.reply_tokens} tokens, the shipped trim policy on its exact token count: "
        f"over {results.budget} tokens, the oldest turns are dropped to 75 % of it), "
        f"{results.turns} turns, run twice: with llama.cpp's KV cache trimmed in place "
        "(the dropped turns removed from the cache and what follows shifted down, so "
        "only the new turn is evaluated) and with the old path forced "
        "(`LocalLlama(trim_in_place=False)`: llama.cpp reuses only the common prefix, the "
        "system prompt, and reads the rest again). First token: ms from the request to "
        "the first text delta, p50 / max. *Evaluated*: tokens llama.cpp evaluated on a "
        "trimmed turn (its own counters), the reply's included."
    )
    rows = [_row(run) for run in results.runs]
    headers = [
        "Mode",
        "untrimmed turns",
        "trimmed turns",
        "trims",
        "evaluated (trimmed, p50)",
        "run",
    ]
    return "\n\n".join([f"## {LONG_SESSION_TITLE}", method, table(headers, rows)])


SCENARIO = Scenario(
    "long-session",
    (LONG_SESSION_TITLE,),
    run_long_session_bench,
    lambda r: [long_session_section(r)],
    True,
)

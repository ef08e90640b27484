"""The turn-taking section of the benchmark report (``benchmarks.bench_turns``);
``python -m benchmarks.report_turns [--whisper] [FILE…]`` runs it alone and prints it."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence

from benchmarks.bench_turns import (
    LEAD_S,
    LONG_PAUSE_S,
    TAIL_S,
    Heard,
    SetupRun,
    run_turns_bench,
)
from benchmarks.prose import prose, title
from benchmarks.scenario import Scenario
from benchmarks.table import table
from voice_membrane.bench.stats import median, summarize
from voice_membrane.pipeline.config import ConfigError

TURNS_TITLE = title("turns")
HEADERS = [
    "Setup",
    "recogniser",
    "complete turns",
    "delay p50 / p95, ms",
    "cut",
    "with thinking pauses",
    "cut",
    f"cut, pauses ≥ {LONG_PAUSE_S} s",
    "split",
    "end unheard",
    "end reasons",
    "model ms p50 / max",
    "run, s",
]


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole}" if whole else "—"


def _kind(run: SetupRun, kind: str) -> list[Heard]:
    return [h for h in run.heard if h.entry.kind == kind]


def row(run: SetupRun) -> list[object]:
    complete, paused = _kind(run, "complete"), _kind(run, "thinking_pause")
    delays = summarize([d for h in complete if (d := h.delay_ms) is not None])
    long = [h for h in paused if h.entry.longest_pause_s >= LONG_PAUSE_S]
    reasons = Counter(reason for h in run.heard for _, reason, _ in h.turns)
    model = [ms for h in run.heard for _, _, ms in h.turns if ms is not None]
    return [
        run.label,
        run.stt,
        len(complete),
        "—" if delays is None else f"{delays['p50']:.0f} / {delays['p95']:.0f}",
        _share(sum(h.cut for h in complete), len(complete)),
        len(paused),
        _share(sum(h.cut for h in paused), len(paused)),
        _share(sum(h.cut for h in long), len(long)),
        sum(len(h.turns) > 1 for h in run.heard),
        sum(not h.end_heard for h in run.heard),
        ", ".join(f"{r} {n}" for r, n in reasons.most_common()),
        f"{median(model):.0f} / {max(model):.0f}" if model else "—",
        f"{run.seconds:.0f}",
    ]


def cut_files(runs: Sequence[SetupRun]) -> str:
    """Which thinking-pause files each setup cut (the table's counts, named)."""
    lines = []
    for run in runs:
        names = [h.entry.file.rsplit("/", 1)[-1] for h in _kind(run, "thinking_pause") if h.cut]
        if names:
            lines.append(f"- {run.label}, {run.stt}: {', '.join(f'`{n}`' for n in names)}")
    return "\n".join(lines) or "- none"


def turns_section(runs: Sequence[SetupRun]) -> str:
    rows = table(HEADERS, [row(run) for run in runs])
    return prose("turns", lead_s=LEAD_S, tail_s=TAIL_S, table=rows, cut_files=cut_files(runs))


SCENARIO = Scenario(
    "turns",
    (TURNS_TITLE,),
    run_turns_bench,
    lambda r: [turns_section(r)],
    True,
    (ImportError, ConfigError),  # ConfigError: no end-of-turn model
)

if __name__ == "__main__":  # (here, not in bench_turns: the report imports the bench)
    files = [a for a in sys.argv[1:] if a != "--whisper"] or None
    print(turns_section(run_turns_bench(files, "--whisper" in sys.argv)))

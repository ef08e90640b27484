"""What a benchmark run shows: a table per target, and the JSON of every turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from ..infra.redact import redact
from ..pipeline.event_log import OutputFileError
from .runner import TargetRun

# The table's rows: each figure and what it is (docs/bench.md has the method).
ROWS = (
    ("first_token", "first token"),
    ("first_visible", "first visible"),
    ("first_chunk", "first chunk"),
    ("tts_request", "TTS request"),
    ("tts_first_byte", "TTS first byte"),
    ("first_audio", "first audio"),
    ("last_audio", "last audio"),
    ("turn_end", "turn end"),
    ("llm_share", "LLM share (first chunk token)"),
    ("tts_ttfb", "TTS first byte (in the turn)"),
    ("pipeline_added", "pipeline added"),
    ("ideal", "ideal first audio"),
    ("excess", "excess over the ideal"),
)
# With --url, beside the server's own stamps (docs/bench.md).
CLIENT_ROWS = (
    ("client_first_audio", "client first audio"),
    ("client_minus_server", "client - server first audio"),
)


def target_heading(run: TargetRun) -> str:
    """The target, and how many turns its table stands for."""
    summary = run.summary()
    alone = run.tts_alone
    sessions = summary["sessions"]
    heading = (
        f"{run.target.label} ({run.llm} → {run.tts}): {summary['counted']} turns counted "
        f"of {summary['turns']}, {sessions} session{'s' if sessions != 1 else ''} at once; "
        f"errors {summary['errors']}, excluded {summary['excluded']}"
    )
    if summary["cut_off"]:  # the answers were not whole: the figures still stand
        heading += f", cut off (max_tokens) {summary['cut_off']}"
    if run.interrupted:
        heading += "; interrupted (Ctrl-C): the turns finished before it"
    if run.target.url is not None:
        return heading
    return f"{heading}; TTS first byte alone {'—' if alone is None else f'{alone:.1f} ms'}"


def target_table(run: TargetRun) -> Table:
    """p50 / p95 / p99 / max of every figure over the counted turns, in ms."""
    summary = run.summary()
    table = Table(box=box.MARKDOWN)
    table.add_column("ms", justify="left")
    for name in ("p50", "p95", "p99", "max"):
        table.add_column(name, justify="right")
    figures = summary["figures_ms"]
    rows: tuple[tuple[str, str], ...] = ROWS
    if run.target.url is not None:  # no engine to time alone from a client: no ideal
        rows = tuple(row for row in ROWS if row[0] not in ("ideal", "excess")) + CLIENT_ROWS
    for key, label in rows:
        row = figures.get(key)
        cells = (
            ["—"] * 4 if row is None else [f"{row[q]:.1f}" for q in ("p50", "p95", "p99", "max")]
        )
        table.add_row(label, *cells)
    return table


def bench_json(runs: list[TargetRun], settings: dict[str, Any]) -> dict[str, Any]:
    """The run's settings, every target's summary, and every turn (its report's
    ``to_dict``, with the ideal and the excess over it)."""
    turns = []
    for run in runs:
        for turn in [*run.warm_ups, *run.turns]:
            report = turn.report
            turns.append(
                {
                    "target": run.target.label,
                    "session": turn.session,
                    "prompt": turn.prompt,
                    "warm_up": turn.warm_up,
                    "counted": turn.counted,
                    "error": turn.error,
                    "cut_off": report is not None and report.cut_off,
                    "first_piece": turn.first_piece,
                    "tts_alone_ms": turn.tts_alone_ms,
                    "ideal_ms": None if report is None else run.ideal_ms(turn),
                    "excess_ms": None if report is None else run.excess_ms(turn),
                    "client_first_audio_ms": turn.client_first_audio_ms,
                    "client_minus_server_ms": turn.client_minus_server_ms,
                    "report": None if report is None else report.to_dict(),
                }
            )
    return {"settings": settings, "summary": [run.summary() for run in runs], "turns": turns}


def write_json(path: Path, data: dict[str, Any]) -> None:
    try:
        path.write_text(redact(json.dumps(data, indent=2)) + "\n", encoding="utf-8")
    except OSError as exc:
        raise OutputFileError(f"cannot write {path}: {exc.strerror or exc}") from exc

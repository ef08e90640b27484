"""What a bench run shows in the terminal and writes as JSON: a table of each
target's figures under its heading (``--input``: a row per file too), and every
turn or file heard."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import JustifyMethod
from rich.table import Table

from ..infra.redact import redact
from ..pipeline.event_log import OutputFileError
from .runner import TargetRun
from .voice_run import FIGURES, MODEL_FIGURE, FileSample, VoiceRun

# The first-audio table's rows: each figure and what it is (docs/bench.md has the method).
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
# --input's rows after its figures: the STT's settling, and (scripted) our part of it.
SETTLE_ROWS = (
    ("settle_ms", "STT finalize → final"),
    ("stt_added_ms", "our code over the fake's finalize"),
)
QUANTILES = ("p50", "p95", "p99", "max")
Rows = Sequence[tuple[str, str]]  # (a figure's key, its label)
VOICE_QUANTILES = ("p50", "p95", "max")


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


def voice_heading(run: VoiceRun) -> str:
    s = run.summary()
    wer = "—" if s["wer_mean"] is None else f"{s['wer_mean']:.2f}"
    heading = (
        f"{run.target.label} ({run.stt} → {run.llm} → {run.tts}): {s['files']} files, "
        f"{s['turns']} turns (ended by {s['ended_by']}), errors {s['errors']}, mean WER {wer}"
    )
    if s["split"]:
        heading += f"; heard as the wrong number of turns: {', '.join(s['split'])}"
    if run.interrupted:
        heading += "; interrupted (Ctrl-C): the files finished before it"
    return heading


def figure_rows(run: VoiceRun) -> tuple[tuple[str, str], ...]:
    """``--input``'s rows: the figures, the STT's settling (and, scripted, what
    our code adds over the fake's own finalization); the end-of-turn model's
    time only when it was asked."""
    model = (MODEL_FIGURE,) if MODEL_FIGURE[0] in run.figures() else ()
    return FIGURES + model + (SETTLE_ROWS if run.target.finalize_s is not None else SETTLE_ROWS[:1])


def figure_cells(
    figures: dict[str, Any], rows: Rows, quantiles: Sequence[str]
) -> list[tuple[str, list[str]]]:
    """(key, [label, a cell per quantile in ms]) for each row: the terminal's and the page's."""
    out = []
    for key, label in rows:
        row = figures.get(key)
        out.append((key, [label, *("—" if row is None else f"{row[q]:.1f}" for q in quantiles)]))
    return out


def markdown_table(
    columns: Sequence[tuple[str, JustifyMethod]], rows: Iterable[list[str]]
) -> Table:
    table = Table(box=box.MARKDOWN)
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for row in rows:
        table.add_row(*row)
    return table


def figures_table(figures: dict[str, Any], rows: Rows, quantiles: Sequence[str]) -> Table:
    """A row per figure, a column per quantile, in ms."""
    columns: list[tuple[str, JustifyMethod]] = [("ms", "left"), *((q, "right") for q in quantiles)]
    return markdown_table(columns, (cells for _, cells in figure_cells(figures, rows, quantiles)))


def target_table(run: TargetRun) -> Table:
    """p50 / p95 / p99 / max of every figure over the counted turns, in ms."""
    rows: Rows = ROWS
    if run.target.url is not None:  # no engine to time alone from a client: no ideal
        rows = tuple(row for row in ROWS if row[0] not in ("ideal", "excess")) + CLIENT_ROWS
    return figures_table(run.summary()["figures_ms"], rows, QUANTILES)


def voice_table(run: VoiceRun) -> Table:
    """p50 / p95 / max of every figure over the turns heard, in ms."""
    return figures_table(run.summary()["figures_ms"], figure_rows(run), VOICE_QUANTILES)


def file_cells(sample: FileSample) -> list[str]:
    """A file's name, what was heard (or why not), its WER and its number of turns."""
    heard = sample.error if sample.error is not None and not sample.turns else sample.heard
    wer = "—" if sample.wer is None else f"{sample.wer:.2f}"
    return [sample.input.name, heard, wer, str(len(sample.turns))]


def per_turn(sample: FileSample, key: str) -> str:
    """A figure of each of the file's turns, " / " between them."""
    values = [turn.get(key) for turn in sample.turns]
    return " / ".join("—" if v is None else f"{v:.0f}" for v in values) or "—"


def files_table(run: VoiceRun) -> Table:
    """A row per file: what was heard, its WER, its voice-to-voice latency."""
    columns: list[tuple[str, JustifyMethod]] = [
        ("file", "left"), ("heard", "left"), ("WER", "right"), ("turns", "right"),
        ("endpointing", "right"), ("ended by", "left"), ("voice to voice", "right"),
    ]  # fmt: skip
    return markdown_table(
        columns,
        (
            [
                *file_cells(sample),
                per_turn(sample, "endpointing_ms"),
                " / ".join(str(t.get("endpoint_reason", "—")) for t in sample.turns) or "—",
                per_turn(sample, "voice_to_voice_ms"),
            ]
            for sample in run.files
        ),
    )


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


def voice_json(runs: list[VoiceRun], settings: dict[str, Any]) -> dict[str, Any]:
    """The run's settings, every target's summary, and every file with its turns."""
    files = [
        {
            "target": run.target.label,
            "file": str(sample.input.path),
            "text": sample.input.text,
            "heard": sample.heard,
            "wer": sample.wer,
            "utterances": sample.input.utterances,
            "settle_ms": sample.settle_ms,
            "error": sample.error,
            "turns": sample.turns,
        }
        for run in runs
        for sample in run.files
    ]
    return {"settings": settings, "summary": [run.summary() for run in runs], "files": files}


def write_json(path: Path, data: dict[str, Any]) -> None:
    write_output(path, redact(json.dumps(data, indent=2)) + "\n")


def write_output(path: Path, text: str) -> None:
    """``text`` in ``path``; ``OutputFileError`` (one line) when it cannot be written."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputFileError(f"cannot write {path}: {exc.strerror or exc}") from exc

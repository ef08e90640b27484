"""What ``bench --input`` shows: a table of each target's figures and a line per
file (what was heard, its WER), and the JSON of every file and turn."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from .voice_run import FIGURES, MODEL_FIGURE, VoiceRun

SETTLE_ROWS = (
    ("settle_ms", "STT finalize → final"),
    ("stt_added_ms", "our code over the fake's finalize"),
)


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
    """The table's rows: the figures, the STT's settling (and, scripted, what
    our code adds over the fake's own finalization); the end-of-turn model's
    time only when it was asked."""
    model = (MODEL_FIGURE,) if MODEL_FIGURE[0] in run.figures() else ()
    return FIGURES + model + (SETTLE_ROWS if run.target.finalize_s is not None else SETTLE_ROWS[:1])


def voice_table(run: VoiceRun) -> Table:
    """p50 / p95 / max of every figure over the turns heard, in ms."""
    figures = run.summary()["figures_ms"]
    table = Table(box=box.MARKDOWN)
    table.add_column("ms", justify="left")
    for name in ("p50", "p95", "max"):
        table.add_column(name, justify="right")
    for key, label in figure_rows(run):
        row = figures.get(key)
        cells = ["—"] * 3 if row is None else [f"{row[q]:.1f}" for q in ("p50", "p95", "max")]
        table.add_row(label, *cells)
    return table


def files_table(run: VoiceRun) -> Table:
    """A row per file: what was heard, its WER, its voice-to-voice latency."""
    table = Table(box=box.MARKDOWN)
    for name, justify in (("file", "left"), ("heard", "left"), ("WER", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("turns", justify="right")
    table.add_column("endpointing", justify="right")
    table.add_column("ended by", justify="left")
    table.add_column("voice to voice", justify="right")
    for sample in run.files:
        wer = "—" if sample.wer is None else f"{sample.wer:.2f}"
        ends = " / ".join(f"{t['endpointing_ms']:.0f}" for t in sample.turns) or "—"
        why = " / ".join(str(t.get("endpoint_reason", "—")) for t in sample.turns) or "—"
        v2v = " / ".join(_ms(t["voice_to_voice_ms"]) for t in sample.turns) or "—"
        heard = sample.error if sample.error is not None and not sample.turns else sample.heard
        table.add_row(sample.input.name, heard, wer, str(len(sample.turns)), ends, why, v2v)
    return table


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def voice_json(runs: list[VoiceRun], settings: dict[str, Any]) -> dict[str, Any]:
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

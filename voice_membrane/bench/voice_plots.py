"""``bench --input --html``'s plot: every turn's voice to voice as a stacked
bar of its parts (matplotlib to SVG, as ``plots.py`` draws the first-audio
bench's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .plots import COLOURS, figure_svg, plain_label
from .voice_run import VoiceRun

# The parts of voice to voice, end to end: (label, the turn's figure where it
# ends, the one where it begins: None for the end of speech).
PARTS: tuple[tuple[str, str, str | None], ...] = (
    ("end of speech → turn (endpointing)", "endpointing_ms", None),
    ("turn → request sent", "request_ms", "endpointing_ms"),
    ("request → first audio", "voice_to_voice_ms", "request_ms"),
)


def _part(turn: dict[str, Any], end: str, begin: str | None) -> float:
    return max(0.0, float(turn[end]) - (0.0 if begin is None else float(turn[begin])))


def turn_rows(runs: Sequence[VoiceRun]) -> list[tuple[str, dict[str, Any]]]:
    """(label, turn) for every turn heard whose voice to voice was measured."""
    rows = []
    for run in runs:
        prefix = f"{run.target.label}: " if len(runs) > 1 else ""
        for sample in run.files:
            for n, turn in enumerate(sample.turns, start=1):
                if turn.get("voice_to_voice_ms") is None:
                    continue
                suffix = f" ({n})" if len(sample.turns) > 1 else ""
                rows.append((f"{prefix}{sample.input.name}{suffix}", turn))
    return rows


def parts_svg(rows: Sequence[tuple[str, dict[str, Any]]], salt: str) -> str:
    """A horizontal bar per turn, its parts stacked from the end of speech; a
    tick where the final transcript came (inside the endpointing wait)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 1.4 + 0.32 * len(rows)), layout="constrained")
    axes = figure.add_subplot()
    positions = list(range(len(rows)))
    left = [0.0] * len(rows)
    for (label, end, begin), colour in zip(PARTS, COLOURS, strict=False):
        widths = [_part(turn, end, begin) for _, turn in rows]
        axes.barh(positions, widths, left=left, color=colour, height=0.6, label=label)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    finals = [(p, t["transcript_final_ms"]) for p, (_, t) in zip(positions, rows, strict=True)]
    shown = [(p, ms) for p, ms in finals if ms is not None]
    if shown:
        axes.scatter(
            [ms for _, ms in shown], [p for p, _ in shown], marker="|", s=140,
            color="#222", zorder=3, label="final transcript",
        )  # fmt: skip
    for position, total in zip(positions, left, strict=True):
        axes.text(total, position, f"  {total:.0f}", va="center", fontsize=8)
    axes.set_yticks(positions, [plain_label(label) for label, _ in rows])
    axes.invert_yaxis()  # the first file on top
    axes.set_xlim(0, max(left, default=1.0) * 1.12)  # room for the totals
    axes.set_xlabel("ms since the end of the user's speech (voice to voice)")
    axes.grid(axis="x", alpha=0.3)
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, fontsize=8, frameon=False)
    return figure_svg(figure, salt)

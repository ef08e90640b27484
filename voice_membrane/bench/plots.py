"""The bench pages' plots, drawn by matplotlib to SVG (an optional extra): the
first-audio distribution and a turn's waterfall; ``--input``'s voice to voice in
its parts.

Each figure is a ``matplotlib.figure.Figure`` on an Agg canvas, never pyplot:
no global figure state and no GUI backend, so it works headless and in threads.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..pipeline.config import ConfigError
from .runner import TargetRun, TurnSample
from .stats import nearest_rank
from .voice_run import VoiceRun

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

EXTRA_HINT = "pip install 'voice-membrane[bench]'"
# The waterfall's stages: (from stamp, to stamp, label); request_sent is 0.
STAGES = (
    ("request_sent", "first_token", "request → first token"),
    ("first_token", "first_visible", "first token → first visible"),
    ("first_visible", "first_chunk", "first visible → first chunk"),
    ("first_chunk", "tts_request", "first chunk → TTS request"),
    ("tts_request", "tts_first_byte", "TTS request → TTS first byte"),
    ("tts_first_byte", "first_audio", "TTS first byte → first audio"),
    ("first_audio", "last_audio", "first audio → last audio"),
)
COLOURS = ("#4c72b0", "#55a868", "#8172b2", "#ccb974", "#c44e52", "#dd8452", "#64b5cd")
# The parts of voice to voice, end to end: (label, the turn's figure where it
# ends, the one where it begins: None for the end of speech).
PARTS: tuple[tuple[str, str, str | None], ...] = (
    ("end of speech → turn (endpointing)", "endpointing_ms", None),
    ("turn → request sent", "request_ms", "endpointing_ms"),
    ("request → first audio", "voice_to_voice_ms", "request_ms"),
)
_PROLOGUE = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)  # the XML declaration and DOCTYPE


def require_matplotlib() -> None:
    """``ConfigError`` (one line) when the plotting extra is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(f"--html needs matplotlib: {EXTRA_HINT}") from None


def median_turn(run: TargetRun) -> TurnSample | None:
    """The counted turn whose first audio is the median (nearest rank)."""
    turns = [t for t in run.counted if t.report is not None]
    if not turns:
        return None
    firsts = [_first_audio(t) for t in turns]
    median = nearest_rank(firsts, 0.5)
    return next(t for t, first in zip(turns, firsts, strict=True) if first == median)


def first_audios(run: TargetRun) -> list[float]:
    return [_first_audio(t) for t in run.counted if t.report is not None]


def _first_audio(turn: TurnSample) -> float:
    assert turn.report is not None and turn.report.first_audio_ms is not None  # counted
    return turn.report.first_audio_ms


def waterfall_svg(turn: TurnSample, x_max: float, salt: str) -> str:
    """The stages of ``turn`` as horizontal bars on a ms axis (0 to ``x_max``, the
    same for every target so their waterfalls compare)."""
    assert turn.report is not None
    stamps = turn.report.stamps_ms
    figure, axes = _axes(3.2)
    labels = []
    for row, (start, end, label) in enumerate(STAGES):
        labels.append(label)
        begin, finish = stamps.get(start), stamps.get(end)
        if begin is None or finish is None:
            axes.text(0, row, "  (not stamped)", va="center", fontsize=8, color="#888")
            continue
        low, high = min(begin, finish), max(begin, finish)
        # A stage of a few µs still shows as a sliver at its place on the axis.
        width = max(high - low, x_max * 0.004)
        axes.barh(row, width, left=low, color=COLOURS[row], height=0.6)
        note = f"  at {finish:.1f} ms (+{finish - begin:.1f})"
        axes.text(low + width, row, note, va="center", fontsize=8)
    axes.set_yticks(range(len(STAGES)), labels)
    axes.invert_yaxis()  # the request on top, as the turn runs
    axes.set_xlim(0, x_max * 1.2)  # room for the last bar's label
    return _svg(figure, axes, "ms since the LLM request was sent", salt)


def distribution_svg(runs: Sequence[TargetRun], salt: str) -> str:
    """First audio of every counted turn, a box and the turns as dots per target,
    all targets on one ms axis."""
    shown = [run for run in runs if first_audios(run)]
    figure, axes = _axes(1.2 + 0.7 * len(shown))
    data = [first_audios(run) for run in shown]
    positions = list(range(1, len(shown) + 1))
    axes.boxplot(data, positions=positions, widths=0.5, showfliers=False, **_horizontal())
    for position, values, colour in zip(positions, data, COLOURS * len(shown), strict=False):
        # A fixed spread (no randomness) so that equal values stay visible.
        offsets = [((i % 7) - 3) * 0.04 for i in range(len(values))]
        axes.scatter(values, [position + o for o in offsets], s=12, color=colour, alpha=0.7)
    axes.set_yticks(positions, [plain_label(run.target.label) for run in shown])
    axes.invert_yaxis()
    axes.set_xlim(left=0)
    return _svg(figure, axes, "first audio, ms since the LLM request was sent", salt)


def _horizontal() -> dict[str, Any]:
    """A horizontal box plot's argument: ``orientation`` since matplotlib 3.10,
    ``vert`` before (deprecated since)."""
    import matplotlib

    major, minor = (int(part) for part in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


def plain_label(label: str) -> str:
    """A label shown as written: ``$`` would start matplotlib's math text."""
    return label.replace("$", r"\$")


def _axes(height: float) -> tuple[Figure, Axes]:
    """A figure 9 inches wide and its one plot."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, height), layout="constrained")
    return figure, figure.add_subplot()


def _svg(figure: Figure, axes: Axes, xlabel: str, salt: str) -> str:
    """The figure as an ``<svg>`` element to inline (the x axis labelled, a grid
    along it): no XML prologue, ids salted so that two figures in one page never
    share one (a clip path would cross over)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    axes.set_xlabel(xlabel)
    axes.grid(axis="x", alpha=0.3)
    FigureCanvasAgg(figure)
    out = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        figure.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    return _PROLOGUE.sub("", out.getvalue(), count=1).strip()


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
    figure, axes = _axes(1.4 + 0.32 * len(rows))
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
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, fontsize=8, frameon=False)
    return _svg(figure, axes, "ms since the end of the user's speech (voice to voice)", salt)

"""``--html``: one self-contained page (no network needed to open it) with the
first-audio distribution of every target, and per target the waterfall of its
median turn and its table. Every text from outside (prompts, labels, errors) is
HTML-escaped; the plots are matplotlib's SVG, inlined."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from ..infra.redact import redact
from ..pipeline.event_log import OutputFileError
from .plots import distribution_svg, first_audios, median_turn, waterfall_svg
from .report import ROWS, target_heading
from .runner import TargetRun

QUANTILES = ("p50", "p95", "p99", "max")
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 980px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
svg { max-width: 100%; height: auto; display: block; }
table { border-collapse: collapse; margin-top: 0.8em; }
th, td { padding: 0.2em 0.8em; border-bottom: 1px solid #ddd; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #555; font-size: 0.9em; }
.error { color: #b00; }
"""


def page_start(heading: str, settings: dict[str, Any]) -> list[str]:
    """The page's head, its heading and the run's settings (``bench --input``'s
    page shares it)."""
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>voice-membrane bench</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>voice-membrane bench: {page_text(heading)}</h1>",
        f'<p class="note">{page_text(_settings_line(settings))}</p>',
    ]


def bench_page(runs: Sequence[TargetRun], settings: dict[str, Any]) -> str:
    """The whole page as text."""
    measured = [run for run in runs if run.error is None]
    parts = page_start("first audio", settings)
    if any(first_audios(run) for run in measured):
        parts += [
            "<h2>First audio of every counted turn</h2>",
            distribution_svg(measured, salt="distribution"),
        ]
    medians = {id(run): median_turn(run) for run in measured}
    ends = [
        max(v for v in turn.report.stamps_ms.values() if v is not None)
        for turn in medians.values()
        if turn is not None and turn.report is not None
    ]
    x_max = max(ends, default=1.0)
    for index, run in enumerate(runs):
        parts.append(f"<h2>{page_text(run.target.label)}</h2>")
        if run.error is not None:
            parts.append(f'<p class="error">not measured: {page_text(run.error)}</p>')
            continue
        parts.append(f'<p class="note">{page_text(target_heading(run))}</p>')
        turn = medians[id(run)]
        if turn is not None and turn.report is not None:
            first = turn.report.first_audio_ms
            parts += [
                f"<p>The median turn (first audio {first:.1f} ms), asked "
                f"“{page_text(turn.prompt)}”:</p>",
                waterfall_svg(turn, x_max, salt=f"waterfall-{index}"),
            ]
        parts.append(_table(run))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def page_text(text: str) -> str:
    """Outside text, inert in the page (and no key in it, as in every output)."""
    return escape(redact(text))


def _settings_line(settings: dict[str, Any]) -> str:
    shown = {True: "yes", False: "no"}

    def value_of(value: Any) -> Any:
        if isinstance(value, bool):
            return shown[value]
        return " ".join(str(v) for v in value) if isinstance(value, list) else value

    return ", ".join(
        f"{name} {value_of(value)}" for name, value in settings.items() if value is not None
    )


def _table(run: TargetRun) -> str:
    """The terminal's table: p50 / p95 / p99 / max of every figure, in ms."""
    return figures_table(run.summary()["figures_ms"], ROWS, QUANTILES)


def figures_table(
    figures: dict[str, Any], rows: Sequence[tuple[str, str]], quantiles: Sequence[str]
) -> str:
    """A row per figure (``data-figure`` its key), a column per quantile, in ms."""
    head = "".join(f'<th class="n">{q}</th>' for q in quantiles)
    out = [f"<table><thead><tr><th>ms</th>{head}</tr></thead><tbody>"]
    for key, label in rows:
        row = figures.get(key)
        cells = "".join(
            f'<td class="n">{"—" if row is None else f"{row[q]:.1f}"}</td>' for q in quantiles
        )
        out.append(f'<tr data-figure="{key}"><td>{page_text(label)}</td>{cells}</tr>')
    out.append("</tbody></table>")
    return "\n".join(out)


def write_html(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputFileError(f"cannot write {path}: {exc.strerror or exc}") from exc

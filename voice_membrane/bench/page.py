"""``--html``: one self-contained page (no network needed to open it). The
first-audio bench's: the first-audio distribution of every target, and per target
the waterfall of its median turn and its table; ``--input``'s: every turn's voice
to voice in its parts, and per target its figures' table and a row per file.
Every text from outside (prompts, labels, file names, transcripts, errors) is
HTML-escaped; the plots are matplotlib's SVG, inlined."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from ..infra.redact import redact
from .plots import distribution_svg, first_audios, median_turn, parts_svg, turn_rows, waterfall_svg
from .report import (
    QUANTILES,
    ROWS,
    VOICE_QUANTILES,
    Rows,
    figure_cells,
    figure_rows,
    file_cells,
    per_turn,
    target_heading,
    voice_heading,
)
from .runner import TargetRun
from .voice_run import VoiceRun

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
NUMBER = ' class="n"'  # a cell right-aligned
# --input's files table: its figures, per turn (" / " between the turns of a file).
FILE_COLUMNS = (
    ("endpointing_ms", "endpointing"),
    ("transcript_final_ms", "final"),
    ("request_ms", "request"),
    ("first_audio_ms", "first audio"),
    ("voice_to_voice_ms", "voice to voice"),
)


def bench_page(runs: Sequence[TargetRun], settings: dict[str, Any]) -> str:
    """The first-audio bench's page as text."""
    measured = [run for run in runs if run.error is None]
    parts = _page_start("first audio", settings)
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
        if not _target_start(parts, run.target.label, run.error, target_heading(run)):
            continue
        turn = medians[id(run)]
        if turn is not None and turn.report is not None:
            first = turn.report.first_audio_ms
            parts += [
                f"<p>The median turn (first audio {first:.1f} ms), asked "
                f"“{page_text(turn.prompt)}”:</p>",
                waterfall_svg(turn, x_max, salt=f"waterfall-{index}"),
            ]
        parts.append(_figures(run.summary()["figures_ms"], ROWS, QUANTILES))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def voice_page(runs: Sequence[VoiceRun], settings: dict[str, Any]) -> str:
    """``--input``'s page as text."""
    parts = _page_start("voice to voice", settings)
    rows = turn_rows([run for run in runs if run.error is None])
    if rows:
        parts += [
            "<h2>Voice to voice of every turn, in its parts</h2>",
            '<p class="note">ms from the end of the user\'s speech to the first audio '
            "of the reply; the tick is the final transcript, which the endpointing waits for"
            "</p>",
            parts_svg(rows, salt="voice-parts"),
        ]
    for run in runs:
        if _target_start(parts, run.target.label, run.error, voice_heading(run)):
            figures = run.summary()["figures_ms"]
            parts += [_figures(figures, figure_rows(run), VOICE_QUANTILES), _files(run)]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def page_text(text: str) -> str:
    """Outside text, inert in the page (and no key in it, as in every output)."""
    return escape(redact(text))


def _page_start(heading: str, settings: dict[str, Any]) -> list[str]:
    """The page's head, its heading and the run's settings."""
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>voice-membrane bench</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>voice-membrane bench: {page_text(heading)}</h1>",
        f'<p class="note">{page_text(_settings_line(settings))}</p>',
    ]


def _target_start(parts: list[str], label: str, error: str | None, heading: str) -> bool:
    """A target's heading, and its reason when it was not measured (then False)."""
    parts.append(f"<h2>{page_text(label)}</h2>")
    if error is not None:
        parts.append(f'<p class="error">not measured: {page_text(error)}</p>')
        return False
    parts.append(f'<p class="note">{page_text(heading)}</p>')
    return True


def _settings_line(settings: dict[str, Any]) -> str:
    def value_of(value: Any) -> Any:
        if isinstance(value, bool):
            return "yes" if value else "no"
        return " ".join(str(v) for v in value) if isinstance(value, list) else value

    return ", ".join(
        f"{name} {value_of(value)}" for name, value in settings.items() if value is not None
    )


def _figures(figures: dict[str, Any], rows: Rows, quantiles: Sequence[str]) -> str:
    """A row per figure (``data-figure`` its key), a column per quantile, in ms."""
    return _table(["ms", *quantiles], figure_cells(figures, rows, quantiles), numeric_from=1)


def _files(run: VoiceRun) -> str:
    """A row per file: what was heard, its WER, each turn's figures."""
    headers = ["file", "heard", "WER", "turns", *(label for _, label in FILE_COLUMNS)]
    rows = [
        (None, [*file_cells(sample), *(per_turn(sample, key) for key, _ in FILE_COLUMNS)])
        for sample in run.files
    ]
    return _table(headers, rows, numeric_from=2, css=' class="files"')


def _table(
    headers: Sequence[str],
    rows: Iterable[tuple[str | None, Sequence[str]]],
    numeric_from: int,
    css: str = "",
) -> str:
    """Columns from ``numeric_from`` on are numbers (right-aligned); a row's key,
    when given, is its ``data-figure``."""

    def cells(tag: str, texts: Sequence[str]) -> str:
        opens = [
            f"<{tag}>" if i < numeric_from else f'<{tag} class="n">' for i in range(len(texts))
        ]
        return "".join(
            f"{o}{page_text(text)}</{tag}>" for o, text in zip(opens, texts, strict=True)
        )

    out = [f"<table{css}><thead><tr>{cells('th', headers)}</tr></thead><tbody>"]
    for key, row in rows:
        figure = "" if key is None else f' data-figure="{key}"'
        out.append(f"<tr{figure}>{cells('td', row)}</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)

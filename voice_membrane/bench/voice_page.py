"""``bench --input --html``: one self-contained page, as the first-audio
bench's (``page.py``: its head, style and tables): every turn's voice to voice
split into its parts, and per target the figures' table and a row per file
(what was heard, its WER when the text is known, each turn's figures). Every
text from outside (file names, transcripts, errors) is HTML-escaped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .page import figures_table, page_start, page_text
from .voice_plots import parts_svg, turn_rows
from .voice_report import figure_rows, voice_heading
from .voice_run import VoiceRun

QUANTILES = ("p50", "p95", "max")
# The files table's figures, per turn (" / " between the turns of a file).
FILE_COLUMNS = (
    ("endpointing_ms", "endpointing"),
    ("transcript_final_ms", "final"),
    ("request_ms", "request"),
    ("first_audio_ms", "first audio"),
    ("voice_to_voice_ms", "voice to voice"),
)


def voice_page(runs: Sequence[VoiceRun], settings: dict[str, Any]) -> str:
    """The whole page as text."""
    parts = page_start("voice to voice", settings)
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
        parts.append(f"<h2>{page_text(run.target.label)}</h2>")
        if run.error is not None:
            parts.append(f'<p class="error">not measured: {page_text(run.error)}</p>')
            continue
        parts += [
            f'<p class="note">{page_text(voice_heading(run))}</p>',
            figures_table(run.summary()["figures_ms"], figure_rows(run), QUANTILES),
            _files_table(run),
        ]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _files_table(run: VoiceRun) -> str:
    head = "".join(f'<th class="n">{page_text(label)}</th>' for _, label in FILE_COLUMNS)
    out = [
        '<table class="files"><thead><tr><th>file</th><th>heard</th>'
        f'<th class="n">WER</th><th class="n">turns</th>{head}</tr></thead><tbody>'
    ]
    for sample in run.files:
        heard = sample.error if sample.error is not None and not sample.turns else sample.heard
        wer = "—" if sample.wer is None else f"{sample.wer:.2f}"
        cells = "".join(
            f'<td class="n">{_per_turn(sample.turns, key)}</td>' for key, _ in FILE_COLUMNS
        )
        out.append(
            f"<tr><td>{page_text(sample.input.name)}</td><td>{page_text(heard)}</td>"
            f'<td class="n">{wer}</td><td class="n">{len(sample.turns)}</td>{cells}</tr>'
        )
    out.append("</tbody></table>")
    return "\n".join(out)


def _per_turn(turns: list[dict[str, Any]], key: str) -> str:
    values = [turn.get(key) for turn in turns]
    return " / ".join("—" if v is None else f"{v:.0f}" for v in values) or "—"

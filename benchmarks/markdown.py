"""Minimal markdown rendering for the benchmark report."""

from __future__ import annotations

from collections.abc import Sequence


def cell(value: object) -> str:
    """One table cell: pipes escaped, newlines shown as ⏎ so a row stays on one line."""
    return str(value).replace("|", "\\|").replace("\n", "⏎")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def quoted(text: str, limit: int = 0) -> str:
    """``text`` as inline code, optionally cut to ``limit`` characters, newlines visible."""
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    return "`" + text.replace("\n", "⏎").replace("`", "'") + "`"

"""Pipe tables, streamed row by row, said as phrases instead of cells and pipes.

``TableFilter`` reads ``Segment``\\ s (``MarkdownFilter``'s output, so emphasis in
cells is already gone) and writes ``Segment``\\ s, streaming and independent of
how its input was split.

A table is a line starting with ``|`` (after blanks) — its header — followed by a
delimiter row (``|---|:--:|``: only ``|``, ``-``, ``:`` and blanks, one ``-`` run
per cell) with as many cells. Rows are the lines starting with ``|`` that follow;
the first line that does not start with ``|`` (a blank line, prose) ends the table.
Only a line starting with ``|`` is held, and only until it is complete and, if it
could be a header, until the next line shows whether it is a delimiter row: a line
with a ``|`` somewhere in prose (``a | b``) is never held and never a table, nor is
a line of 4096 characters or more. A table without a leading ``|`` is not
recognised (its text passes through).

- ``mode="rows"``: the header and delimiter rows are not said; each row is said as
  one phrase, its first cell then the other cells each after its column's header:
  ``| Paris | 12 °C | sunny |`` under ``| City | High | Sky |`` →
  ``Paris: High 12 °C, Sky sunny.`` (the first column's header is not said: the
  row's first cell names the row). Empty cells are left out. The row's newline is
  kept, so each row ends a piece. A table that ends with no row says its header
  cells (``City, High, Sky.``), so no word of it is lost.
- ``mode="skip"``: the table is not said; ``table_text``, if set, is said in its
  place as soon as the delimiter row is complete (spanning the header row).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal, TypeAlias

from .held import HeldText
from .markdown import Segment

TableMode: TypeAlias = Literal["rows", "skip"]

_BLANK = " \t"
_DELIMITER_CHARS = frozenset("|:- \t\r")
_DELIMITER_CELL = re.compile(r":?-+:?")
_CELL_TRIM = " \t\r.,;:"
_LINE_MAX = 4096  # a longer line is no table row: it is not held


def _cells(line: str) -> list[str]:
    line = line.strip(" \t\r")
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return [cell.strip(" \t\r") for cell in line.split("|")]


def _is_delimiter(line: str, cells: int | None = None) -> bool:
    parts = _cells(line)
    if cells is not None and len(parts) != cells:
        return False
    return all(_DELIMITER_CELL.fullmatch(part) for part in parts)


def row_phrase(header: list[str], cells: list[str]) -> str:
    """A row said as a phrase: ``first: header cell, header cell.``"""
    label, pairs = "", []
    for i, raw in enumerate(cells):
        cell = raw.strip(_CELL_TRIM)
        if not cell:
            continue
        if i == 0:
            label = cell
            continue
        name = header[i].strip(_CELL_TRIM) if i < len(header) else ""
        pairs.append(f"{name} {cell}" if name else cell)
    body = ", ".join(pairs)
    phrase = f"{label}: {body}" if label and body else label or body
    return phrase + "." if phrase and phrase[-1] not in ".!?…" else phrase


class TableFilter:
    """Say pipe tables row by row or skip them (see the module docstring)."""

    def __init__(self, *, mode: TableMode = "rows", table_text: str | None = None) -> None:
        if mode not in ("rows", "skip"):
            raise ValueError(f'tables must be "rows" or "skip", not {mode!r}')
        self._mode = mode
        self._table_text = table_text or None
        self._reset()

    def _reset(self) -> None:
        self._held = HeldText()
        self._line_start = True
        self._header: list[str] | None = None  # set while inside a table
        self._rows = 0  # rows of the current table said so far

    def feed(self, segments: Iterable[Segment]) -> list[Segment]:
        self._held.add(segments)
        return self._run(final=False)

    def flush(self) -> list[Segment]:
        out = self._run(final=True)
        self._reset()
        return out

    def _run(self, *, final: bool) -> list[Segment]:
        held = self._held
        text, n = held.text, len(held.text)
        while held.pos < n:
            pos = held.pos
            if not self._line_start:
                nl = text.find("\n", pos)
                if nl < 0:
                    held.keep(n - pos)
                    break
                held.keep(nl + 1 - pos)
                self._line_start = True
                continue
            q = pos
            while q < n and text[q] in _BLANK:
                q += 1
            if q == n and not final:
                break  # indentation: what follows decides
            if q == n or text[q] != "|":
                self._end_table()  # any other line ends a table
                self._line_start = False
                continue
            nl = text.find("\n", q)
            if (n if nl < 0 else nl) - pos >= _LINE_MAX:
                self._end_table()  # too long for a table row: prose, not held
                self._line_start = False
                continue
            if nl < 0 and not final:
                break  # a pipe line is decided whole
            end = n if nl < 0 else nl
            after = n if nl < 0 else nl + 1
            line = text[pos:end]
            if self._header is not None:
                self._row(line, end - pos, after - end)
                continue
            verdict = self._delimiter_follows(after, len(_cells(line)), final) if nl >= 0 else False
            if verdict is None:
                break
            if not verdict:
                held.keep(after - pos)  # a line that starts with "|", in prose
                continue
            self._start_table(line, end - pos, after - end)
        if final and held.pos == n:
            self._end_table()
        return held.take_out()

    def _end_table(self) -> None:
        if self._header is not None and self._mode == "rows" and not self._rows:
            phrase = row_phrase([], [", ".join(c for c in self._header if c)])
            if phrase:
                self._held.insert(phrase + "\n")
        self._header = None

    def _delimiter_follows(self, j: int, cells: int, final: bool) -> bool | None:
        """Is the line at ``j`` a delimiter row of ``cells`` cells? None: not known yet."""
        text = self._held.text
        q = j
        while q < len(text) and text[q] != "\n":
            if text[q] not in _DELIMITER_CHARS or q - j >= _LINE_MAX:
                return False
            q += 1
        if q == len(text) and not final:
            return None
        line = text[j:q]
        return "|" in line and _is_delimiter(line, cells)

    def _start_table(self, header_line: str, length: int, newline: int) -> None:
        held = self._held
        self._header = _cells(header_line)
        self._rows = 0
        text = held.text
        nl = text.find("\n", held.pos + length + newline)
        delimiter = (len(text) if nl < 0 else nl + 1) - (held.pos + length + newline)
        if self._mode == "skip" and self._table_text is not None:
            held.replace(length, self._table_text)
            held.keep(newline)  # the phrase ends a piece
        else:
            held.drop(length + newline)
        held.drop(delimiter)

    def _row(self, line: str, length: int, newline: int) -> None:
        held = self._held
        if self._mode == "skip" or _is_delimiter(line):
            held.drop(length + newline)
            return
        assert self._header is not None
        phrase = row_phrase(self._header, _cells(line))
        if not phrase:
            held.drop(length + newline)
            return
        held.replace(length, phrase)
        held.keep(newline)  # each row ends a piece
        self._rows += 1

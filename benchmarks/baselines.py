"""Two naive speech splitters to compare against — the benchmark's own code, not the library's.

They model what a simple "sentence aggregator" in a voice pipeline does: buffer the LLM's
text and release it only at a sentence end. ``SentenceSplitter()`` is the plain one;
``SentenceSplitter(min_first_chars=20)`` also refuses a first piece shorter than 20
characters (a common guard against speaking a lone "Sure!"). Neither knows about
abbreviations, decimals or URLs, on purpose: that is the behaviour being measured.

A sentence end is ``.``, ``!`` or ``?`` (plus any closing quotes or brackets) followed by
whitespace. The full-width stops U+3002, U+FF01 and U+FF1F also count, without the
whitespace (CJK puts none), so CJK replies are not held to flush() by a rule written for
English.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SENTENCE_END = re.compile(r"[.!?]+[\"')\]\u201d\u2019]*(?=\s)|[\u3002\uff01\uff1f]+")


@dataclass(frozen=True, slots=True)
class Piece:
    """A released piece: its text and its ``[start, end)`` offsets in the whole input."""

    text: str
    start: int
    end: int


class SentenceSplitter:
    """Release text at sentence ends only; optionally hold the first piece to a minimum length."""

    def __init__(self, min_first_chars: int = 0) -> None:
        self._min_first_chars = min_first_chars
        self._buffer = ""
        self._offset = 0  # input offset of ``_buffer[0]``
        self._released_any = False

    def feed(self, text: str) -> list[Piece]:
        self._buffer += text
        pieces: list[Piece] = []
        search_from = 0
        while match := _SENTENCE_END.search(self._buffer, search_from):
            cut = match.end()
            candidate = self._buffer[:cut]
            if not self._released_any and len(candidate.strip()) < self._min_first_chars:
                search_from = cut  # too short to open with: look for the next sentence end
                continue
            pieces.append(self._release(cut))
            search_from = 0
        return pieces

    def flush(self) -> list[Piece]:
        if not self._buffer.strip():
            return []
        return [self._release(len(self._buffer))]

    def _release(self, cut: int) -> Piece:
        piece = Piece(self._buffer[:cut].strip(), self._offset, self._offset + cut)
        self._buffer = self._buffer[cut:]
        self._offset += cut
        self._released_any = True
        return piece

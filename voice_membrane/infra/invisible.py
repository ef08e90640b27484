"""Invisible characters, and text read without them.

A key with a zero-width space, a soft hyphen or a word joiner inside reads,
pastes and is spoken as the key: the secret masker matches the text without
them (``Folded``) and masks the original span, invisible characters and all.
Invisible here is Unicode's ``Default_Ignorable_Code_Point``: the format
characters (zero-width space and joiners, soft hyphen, word joiner, BOM,
direction marks and overrides, tags), variation selectors, the combining
grapheme joiner and the Hangul fillers. All of them are outside ASCII.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Final

INVISIBLE_CLASS: Final = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)  # (the characters themselves: for a regex's character class)
_RUNS: Final = re.compile(f"[{INVISIBLE_CLASS}]+")


def has_invisible(text: str) -> bool:
    """Does ``text`` hold an invisible character? (ASCII text: at once.)"""
    return not text.isascii() and _RUNS.search(text) is not None


def without_invisible(text: str) -> str:
    """``text`` with its invisible characters removed."""
    return text if text.isascii() else _RUNS.sub("", text)


class Folded:
    """``text`` without its invisible characters, and the way back: offsets in
    ``folded`` map to offsets in ``text`` (``original``) and back (``at``)."""

    def __init__(self, text: str) -> None:
        parts: list[str] = []
        # Per run of invisible characters: where it starts and ends in ``text``,
        # where the character after it is in ``folded``, and how many were
        # removed up to its end.
        self._starts: list[int] = [0]
        self._ends: list[int] = [0]
        self._after: list[int] = [0]
        self._removed: list[int] = [0]
        at = removed = 0
        for run in _RUNS.finditer(text):
            parts.append(text[at : run.start()])
            self._starts.append(run.start())
            self._ends.append(run.end())
            self._after.append(run.start() - removed)
            removed += run.end() - run.start()
            self._removed.append(removed)
            at = run.end()
        parts.append(text[at:])
        self.folded = "".join(parts)

    def original(self, pos: int) -> int:
        """Where the character at ``pos`` in ``folded`` is in ``text`` (its end
        at the end: trailing invisible characters belong to what ends there)."""
        return pos + self._removed[bisect_right(self._after, pos) - 1]

    def at(self, pos: int) -> int:
        """Where ``text[pos:]`` begins in ``folded`` (inside a run: after it)."""
        i = bisect_right(self._starts, pos) - 1
        if i and pos < self._ends[i]:
            pos = self._ends[i]
        return pos - self._removed[i]


__all__ = ["INVISIBLE_CLASS", "Folded", "has_invisible", "without_invisible"]

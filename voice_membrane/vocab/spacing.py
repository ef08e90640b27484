"""Where two pieces of text meet (two spoken pieces, two text blocks, an
STT's finals or words): a space keeps two words apart, but punctuation that
closes (``.`` ``,`` ``?`` ``)`` ``”`` …) attaches to the word before it and
punctuation that opens (``(`` ``“`` ``¿`` …) to the word after it — "Paris."
and "(Paris)", never "Paris ." or "( Paris )"."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

CLOSING: Final = frozenset(".,;:!?)]}…%»\u2019”")  # (U+2019: a closing quote, an apostrophe)
OPENING: Final = frozenset("([{«“\u2018¿¡")


def spaced(left: str, right: str) -> bool:
    """Does ``right``, put after ``left``, need a space between them?"""
    if not left or not right or left[-1].isspace() or right[0].isspace():
        return False
    return right[0] not in CLOSING and left[-1] not in OPENING


def join_words(parts: Iterable[str]) -> str:
    """``parts`` joined, a space between two only where ``spaced`` says."""
    out: list[str] = []
    last = ""
    for part in parts:
        if not part:
            continue
        if spaced(last, part):
            out.append(" ")
        out.append(part)
        last = part
    return "".join(out)


__all__ = ["CLOSING", "OPENING", "join_words", "spaced"]

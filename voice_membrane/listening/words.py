"""Judging transcript text by its words: backchannels ("mm-hm", "okay") and
utterances that sound unfinished ("my number is five five five", "and").

Words are normalised before matching: NFKC, case-folded, punctuation around
words dropped, hyphens and apostrophes inside removed, and runs of one letter
collapsed ("Mmm-hmm" → "mhm", "uh-huh" → "uhhuh", "Okay!" → "okay").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_JOINERS = "'\u2019\\-\u2010"  # apostrophes and hyphens inside a word
_WORD = re.compile(rf"[^\W_]+(?:[{_JOINERS}][^\W_]+)*")
_INNER = re.compile(rf"[{_JOINERS}]")
_RUNS = re.compile(r"([^\W\d_])\1+")  # letters only: "555" stays
_NUMBERS = frozenset(
    ("zero", "oh", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
)


def normalise(word: str, collapse: bool = True) -> str:
    folded = _INNER.sub("", unicodedata.normalize("NFKC", word).casefold())
    return _RUNS.sub(r"\1", folded) if collapse else folded


def words(text: str, collapse: bool = True) -> list[str]:
    """The normalised words of ``text`` (letter runs collapsed for matching
    backchannels, whose spellings vary: "mm-hmm", "mmm-hm")."""
    found = _WORD.findall(unicodedata.normalize("NFKC", text))
    return [normalise(w, collapse) for w in found]


class WordJudge:
    """Backchannel and continuation lists, normalised once."""

    def __init__(self, backchannels: Iterable[str], continuations: Iterable[str]) -> None:
        self._backchannels = frozenset(w for b in backchannels for w in words(b))
        self._continuations = frozenset(w for c in continuations for w in words(c, False))

    def is_real(self, text: str) -> bool:
        """Has a word that is not a backchannel ("stop", "wait no", "yes please").
        A backchannel split into pieces is one too: STTs write "uh huh", and
        pocketsphinx hears "mm-hm" as "m m h m"."""
        ws = words(text)
        if len(ws) > 1 and normalise("".join(ws)) in self._backchannels:
            return False
        return any(w not in self._backchannels for w in ws)

    def sounds_unfinished(self, text: str) -> bool:
        """Ends on a continuation word, a number (digits are read in groups:
        "my number is 555 …") unless a question mark closes it ("what is 2
        plus 2?": recognisers close a number read out with a full stop, never
        with a question mark), or a comma or ellipsis."""
        stripped = text.rstrip()
        if stripped.endswith((",", "…", "...", "-", "—")):
            return True
        ws = words(stripped, collapse=False)
        if not ws:
            return False
        last = ws[-1]
        if last in self._continuations:
            return True
        return (last in _NUMBERS or last.isdigit()) and not stripped.endswith("?")

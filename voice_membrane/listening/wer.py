"""Word error rate: how far a transcript is from what was said, in words.

``WER = (substitutions + deletions + insertions) / words in the reference``,
counted by a Levenshtein alignment over words after both texts are normalised
the same way: case folded, punctuation dropped (an apostrophe inside a word is
kept, "don't"; a hyphen separates, "mm-hm" → "mm hm"), digits written as
words where that is trivial (a whole number below 100: "10" → "ten"), so "Set a
timer for 10 minutes." and "set a timer for ten minutes" are the same words.

Sans-I/O and small: used by the tests, the STT benchmark and phrase matching.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_ONES = (
    *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
    *("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"),
    *("seventeen", "eighteen", "nineteen"),
)
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_RIGHT_QUOTE = "\u2019"  # typographic apostrophe, as in "what\u2019s"
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")  # letters/digits, inner apostrophes kept


def number_words(number: int) -> list[str]:
    """0 to 99 as words ("42" → forty two); larger numbers are left as digits."""
    if number < 20:
        return [_ONES[number]]
    tens, ones = divmod(number, 10)
    return [_TENS[tens]] if ones == 0 else [_TENS[tens], _ONES[ones]]


def normalize(text: str) -> list[str]:
    """The words of ``text`` as WER compares them (see the module's docstring)."""
    text = unicodedata.normalize("NFKC", text).casefold().replace(_RIGHT_QUOTE, "'")
    words: list[str] = []
    for word in _WORD.findall(text):
        if word.isdecimal() and word.isascii() and int(word) < 100:
            words += number_words(int(word))
        else:
            words.append(word)
    return words


@dataclass(frozen=True, slots=True)
class WordErrors:
    """The edits that turn the reference into the hypothesis."""

    substitutions: int
    deletions: int  # reference words the hypothesis lacks
    insertions: int  # hypothesis words the reference lacks
    reference_words: int

    @property
    def edits(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        """Edits per reference word; an empty reference: 0 if the hypothesis is
        empty too, else 1 per inserted word (so silence heard as words counts)."""
        return self.edits / max(self.reference_words, 1)

    def __add__(self, other: WordErrors) -> WordErrors:
        """Totals over several files (the overall WER weighs files by their words)."""
        return WordErrors(
            self.substitutions + other.substitutions,
            self.deletions + other.deletions,
            self.insertions + other.insertions,
            self.reference_words + other.reference_words,
        )


NO_ERRORS = WordErrors(0, 0, 0, 0)


def word_errors(reference: str, hypothesis: str) -> WordErrors:
    """The minimum edits from ``reference`` to ``hypothesis``, normalised; among
    alignments with as few edits, the one with the most substitutions (as
    the usual scoring tools report)."""
    ref, hyp = normalize(reference), normalize(hypothesis)
    # Each cell: (edits, -substitutions, deletions, insertions) — tuples compare
    # edits first, then prefer substitutions.
    previous = [(j, 0, 0, j) for j in range(len(hyp) + 1)]
    for i, ref_word in enumerate(ref, 1):
        current = [(i, 0, i, 0)]
        for j, hyp_word in enumerate(hyp, 1):
            e, s, d, n = previous[j - 1]
            best = (e, s, d, n) if ref_word == hyp_word else (e + 1, s - 1, d, n)
            e, s, d, n = previous[j]
            best = min(best, (e + 1, s, d + 1, n))
            e, s, d, n = current[j - 1]
            best = min(best, (e + 1, s, d, n + 1))
            current.append(best)
        previous = current
    _, minus_subs, deletions, insertions = previous[-1]
    return WordErrors(-minus_subs, deletions, insertions, len(ref))


def wer(reference: str, hypothesis: str) -> float:
    """The word error rate of ``hypothesis`` against ``reference``."""
    return word_errors(reference, hypothesis).wer

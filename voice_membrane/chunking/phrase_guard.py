"""``PhraseGuard``: the phrases the voice must never say, and how they are matched.

A phrase is matched on the skeleton of the speech text (``skeleton.py``): case,
compatibility forms, accents, look-alike letters and invisible characters do not
hide it, and punctuation, symbols or line breaks between its words count as the
space they stand for. Whole words only (``damn`` is not in ``damnation``).
``PhraseFilter`` (``phrase_filter.py``) applies it to the text the chunker cuts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from .skeleton import GAP, GAPS, I_OR_L, JOIN, skeleton

_NOT_WORD = "(?![^ \\x1f])"  # followed by a gap or the end
_WORD_START = "(?<![^ \\x1f])[^ \\x1f]"
# The letters of a text that may begin a phrase beginning with a given letter.
_STARTS_WITH = {"i": "i" + I_OR_L, "l": "l" + I_OR_L, I_OR_L: "il" + I_OR_L}


def _tokens(phrase: str) -> list[str]:
    """The regex tokens of a phrase's skeleton: a letter, or what may stand
    between two letters (a break between words; maybe nothing inside a word)."""
    tokens: list[str] = []
    for i, ch in enumerate(phrase):
        if ch == GAP:
            tokens.append("[ \\x1f]")
        elif ch == JOIN:
            tokens.append("[ \\x1f]?")
        else:
            if i and phrase[i - 1] not in GAPS:
                tokens.append("\\x1f?")  # a soft hyphen or joiner inside the word
            if ch in ("i", "l", I_OR_L):
                tokens.append(f"[{ch if ch != I_OR_L else 'il'}\\x01]")
            else:
                tokens.append(re.escape(ch))
    return tokens


def _unspaced(ch: str) -> bool:
    """A letter of a script written without spaces between words (Chinese,
    Japanese kana, Thai, Lao, Myanmar, Khmer): a phrase edge needs no word break."""
    o = ord(ch)
    return (
        0x0E00 <= o <= 0x0EFF
        or 0x1000 <= o <= 0x109F
        or 0x1780 <= o <= 0x17FF
        or 0x3040 <= o <= 0x30FF
        or 0x3400 <= o <= 0x4DBF
        or 0x4E00 <= o <= 0x9FFF
        or 0xF900 <= o <= 0xFAFF
        or 0x20000 <= o <= 0x3FFFF
    )


def _whole(phrase: str) -> str:
    """The regex of a whole phrase: whole words, unless it ends in an unspaced script."""
    return "".join(_tokens(phrase)) + ("" if _unspaced(phrase[-1]) else _NOT_WORD)


def _prefixes(tokens: list[str]) -> str:
    """A regex a text fully matches when it is the start of the phrase."""
    nested = ""
    for token in reversed(tokens):
        nested = token + (f"(?:{nested})?" if nested else "")
    return nested


class PhraseGuard:
    """Phrases the voice must never say: give it to the chunker
    (``SpeechChunker(phrase_guard=PhraseGuard([...]))``; in a pipeline file,
    ``[policy] banned_phrases``). Immutable: one guard serves any number of
    chunkers and sessions.

    Found in the speech text, a phrase and the rest of its sentence are said as
    ``replacement`` (``action="replace"``) or dropped (``action="drop"``, or an
    empty replacement); what of the sentence came before it has gone on already.

    Raises:
        ValueError: no phrase, a phrase with no letter or digit, an unknown
            action, or a replacement that says a banned phrase itself.
    """

    def __init__(
        self,
        phrases: Iterable[str],
        *,
        action: Literal["replace", "drop"] = "replace",
        replacement: str = "",
    ) -> None:
        given = [p for p in phrases if p.strip()]
        if not given:
            raise ValueError("PhraseGuard needs at least one phrase")
        if action not in ("replace", "drop"):
            raise ValueError(f"action must be 'replace' or 'drop', not {action!r}")
        skeletons: list[str] = []
        for phrase in given:
            bones = skeleton(phrase)
            if not bones:
                raise ValueError(
                    f"the banned phrase {phrase[:60]!r} has no letter or digit: "
                    "only letters and digits are matched"
                )
            skeletons.append(bones)
        self.phrases = tuple(given)
        self.action: Literal["replace", "drop"] = action
        self.replacement = replacement if action == "replace" else ""
        # Per first letter (a text's words mostly begin none: one look-up each),
        # the phrases' regexes: whole, and any start of one. Longest first: of two
        # phrases starting at one place, the longer is cut.
        ordered = sorted(set(skeletons), key=len, reverse=True)
        groups: dict[str, list[list[str]]] = {}
        wholes: dict[str, list[str]] = {}
        for bones in ordered:
            for first in _STARTS_WITH.get(bones[0], bones[0]):
                groups.setdefault(first, []).append(_tokens(bones))
                wholes.setdefault(first, []).append(_whole(bones))
        self._whole = {first: re.compile("|".join(found)) for first, found in wholes.items()}
        self._start = {
            first: re.compile("|".join(_prefixes(t) for t in tokens))
            for first, tokens in groups.items()
        }
        # Where a phrase may begin: a word start, or anywhere for one that begins
        # in a script written without spaces.
        unspaced = "".join(sorted({bones[0] for bones in ordered if _unspaced(bones[0])}))
        self._starts = re.compile(_WORD_START + (f"|[{re.escape(unspaced)}]" if unspaced else ""))
        # A match spans at most two skeleton characters per phrase character (a
        # joiner between every two letters).
        self.reach = 2 * max(len(bones) for bones in ordered) + 2
        # With nothing said in its place, the words on either side of a cut meet.
        self.joins = not self.replacement
        self.replacement_skeleton = skeleton(self.replacement)
        if self.replacement and self.find(GAP + self.replacement_skeleton + GAP, 0):
            raise ValueError("the replacement says a banned phrase itself")

    def __repr__(self) -> str:
        return f"PhraseGuard({list(self.phrases)!r}, action={self.action!r})"

    def find(self, skel: str, after: int) -> tuple[int, int] | None:
        """The first phrase in the skeleton ``skel`` that ends past ``after``:
        its ``(start, end)``."""
        for word in self._starts.finditer(skel):
            start = word.start()
            pattern = self._whole.get(skel[start])
            found = pattern.match(skel, start) if pattern is not None else None
            if found is not None and found.end() > after:
                return start, found.end()
        return None

    def forming(self, skel: str, end: int) -> int:
        """Where in ``skel[:end]`` the longest end that a phrase may begin in
        starts (at a word start); ``end`` if none."""
        for word in self._starts.finditer(skel, max(0, end - self.reach), end):
            start = word.start()
            pattern = self._start.get(skel[start])
            if pattern is not None and pattern.fullmatch(skel, start, end):
                return start
        return end

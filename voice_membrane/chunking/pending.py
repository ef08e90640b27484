"""What a cut scan works with: its rules (``CutRules``), its answer (``Cut``), and
``PendingText``, its state over the text pending since the last cut.

``PendingText`` reads past the end of the pending text into the lookahead; where
neither holds the character yet and the stream goes on, it raises ``Undecided``,
which stops the scan: a rule never guesses at unseen text. With ``final``, the end
of the text is the end of the stream, which decides every such spot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .lexicon import DEFAULT_LEXICON, Lexicon

CutKind = Literal["sentence", "clause", "word", "forced"]


@dataclass(frozen=True, slots=True)
class Cut:
    """Cut the pending text before index ``pos``."""

    pos: int
    kind: CutKind


@dataclass(frozen=True, slots=True)
class CutRules:
    """The chunker's tunables (see ``SpeechChunker``)."""

    first_chunk_words: int = 3
    min_clause_words: int = 3
    clause_chars: int = 120
    max_chars: int = 250
    lexicon: Lexicon = field(default=DEFAULT_LEXICON)


class Undecided(Exception):
    """The decision needs unseen text; the cut it concerns is at ``pos`` or later."""

    def __init__(self, pos: int) -> None:
        super().__init__(pos)
        self.pos = pos


class PendingText:
    """The pending text, what is known to follow it, and what the scan has seen so
    far of the piece it is scanning; the rules of a cut are methods of subclasses."""

    def __init__(
        self,
        text: str,
        first: bool,
        final: bool,
        line_start: bool,
        rules: CutRules,
        code: Sequence[bool],
        lookahead: str = "",
    ) -> None:
        self.text = text
        self.lookahead = lookahead
        self.code = code
        self.lexicon = rules.lexicon
        self.first = first
        self.final = final
        self.line_start = line_start
        self.rules = rules
        self.lead = len(text) - len(text.lstrip())
        self.stack: list[str] = []  # the open quotes and brackets, as their closers
        self.words = 0  # words so far: runs with a letter or digit, plus each CJK character
        self.first_word = ""  # the piece's first word, lowercased

    def _in_code(self, i: int) -> bool:
        return i < len(self.code) and self.code[i]

    def _at(self, i: int, cut: int) -> str:
        """``text[i]``, ``""`` past the end of the stream; undecided if not yet known."""
        if i < len(self.text):
            return self.text[i]
        if self.final:
            return ""
        if i - len(self.text) < len(self.lookahead):
            return self.lookahead[i - len(self.text)]
        raise Undecided(cut)

    def _span(self, start: int, end: int) -> str:
        """``text[start:end]``, read on into the lookahead."""
        return (
            (self.text + self.lookahead)[start:end]
            if end > len(self.text)
            else self.text[start:end]
        )

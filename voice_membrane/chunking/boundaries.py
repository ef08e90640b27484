"""Where to cut the pending speech text: a pure scan decided by the text alone.

``find_cut`` scans the text pending since the last cut from its start and returns
the earliest eligible cut, or None when there is none yet. It stops at the first
spot it cannot decide without characters that have not arrived (it never guesses);
``final=True`` says the text ends here, which decides every such spot. A cut found
without ``final`` is therefore the same cut any longer text would give: this is what
makes the chunker independent of how its input was split.

Positions are measured from the first non-space character ("content"); the
leading whitespace of a piece does not count towards the limits.

Cuts, earliest first (a cut at ``pos`` means the piece is ``text[:pos]``):

- newline: a ``\\n`` after content; cut after it.
- sentence: a sentence end (``sentences``).
- clause, word (first piece only) and forced: cuts inside a sentence (``phrases``).

No cut falls inside an open quote or bracket (``quotes``).

Inline code (``code``: the markdown filter's marks) holds no mark, quote or bracket,
and no cut falls inside it; a forced cut takes a space outside it if it can.
"""

from __future__ import annotations

from collections.abc import Sequence

from .pending import Cut, CutRules, Undecided
from .phrases import (
    CJK_CLAUSE_MARKS,
    CLAUSE_MARKS,
    EM_DASH,
    SPACED_DASHES,
    PhraseCuts,
    speakable_end,
)
from .quotes import track_quote
from .sentences import TERMINALS, SentenceEnds


def find_cut(
    text: str,
    *,
    first: bool,
    final: bool,
    line_start: bool,
    rules: CutRules,
    code: Sequence[bool] = (),
    lookahead: str = "",
) -> Cut | None:
    """Return the earliest eligible cut in ``text``, or None if none is decided yet.

    ``first``: this is the stream's first piece. ``final``: the stream ends after
    ``text``. ``line_start``: ``text`` begins a line (stream start or after a newline).
    ``code``: per character of ``text``, whether it is inside inline code (none is
    when shorter). A cut at ``len(text)`` only follows a newline or a full-width clause
    mark; any other end of the text is left to the caller (with ``final``, it is the
    last piece). ``lookahead``: characters known to follow ``text`` but not yet
    given (a word an upstream filter still holds, as it will be said): a decision
    that needs the next character may read them.
    """
    return _Scan(text, first, final, line_start, rules, code, lookahead).run()


def _is_cjk(ch: str) -> bool:
    return (
        "\u3040" <= ch <= "\u30ff"  # kana
        or "\u3400" <= ch <= "\u4dbf"
        or "\u4e00" <= ch <= "\u9fff"
        or "\uf900" <= ch <= "\ufaff"
    )


def _word_at(text: str, i: int) -> str:
    """The run of letters starting at ``text[i]``."""
    j = i
    while j < len(text) and text[j].isalpha():
        j += 1
    return text[i:j]


class _Scan(SentenceEnds, PhraseCuts):
    """One scan of the pending text: counts its words, tracks its quotes, and asks
    the rules at each character for a cut."""

    def run(self) -> Cut | None:
        text, n = self.text, len(self.text)
        if self.lead == n:
            return None
        limit = self.lead + self.rules.max_chars
        run_start, run_counted = -1, False  # the current non-space run
        for i in range(self.lead, min(n, limit + 1)):
            ch = text[i]
            if self._in_code(i):
                # Nothing inside inline code is a mark or a quote; it still has words.
                if run_start < 0 and not ch.isspace():
                    run_start = i
                if ch.isspace():
                    run_start, run_counted = -1, False
                elif ch.isalnum() and not run_counted:
                    self.words, run_counted = self.words + 1, True
                continue
            try:
                cut = self._candidate(i, ch, run_start)
            except Undecided as undecided:
                if undecided.pos > limit:
                    break
                return None
            if cut is not None:
                if cut.pos > limit:
                    break
                return cut
            if ch.isspace():
                run_start, run_counted = -1, False
                continue
            if run_start < 0:
                run_start = i
            if _is_cjk(ch):
                self.words += 1
            elif ch.isalnum() and not run_counted:
                self.words, run_counted = self.words + 1, True
                if self.words == 1:
                    self.first_word = _word_at(text, i).lower()
            track_quote(self.stack, ch, text[i - 1] if i else "")
        return self._forced(limit) if n > limit else None

    def _candidate(self, i: int, ch: str, run_start: int) -> Cut | None:
        text = self.text
        if ch == "\n":
            return Cut(i + 1, "sentence")
        if ch in TERMINALS:
            return None if i and text[i - 1] in TERMINALS else self._sentence(i)
        if ch in CLAUSE_MARKS:
            if not self._clause_ok(i + 1):
                return None
            nxt = self._at(i + 1, i + 1)
            return Cut(i + 1, "clause") if nxt.isspace() else None
        if ch in CJK_CLAUSE_MARKS:
            return Cut(i + 1, "clause") if self._clause_ok(i + 1) else None
        if ch == EM_DASH and (i == 0 or text[i - 1] != EM_DASH):
            return self._dash(i, ch, spaced=False)
        if ch in SPACED_DASHES and i > 0 and text[i - 1].isspace():
            return self._dash(i, ch, spaced=True)
        if self.first and ch.isspace() and run_start >= 0:
            words_ok = self.words >= self.rules.first_chunk_words
            if words_ok and not self.stack and speakable_end(text[run_start:i], self.lexicon):
                return Cut(i, "word")
        return None

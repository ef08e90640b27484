"""Cuts inside a sentence: at a clause mark or dash, after a word (first piece only),
and the forced cut at ``max_chars``.

- clause: ``, ; :`` plus whitespace, ``，；：、``, an em-dash run, or a spaced ``-``,
  ``--``, ``–``; cut after the mark. Outside quotes and brackets only. In the first
  piece once ``min_clause_words`` words precede it; later only at ``clause_chars``
  or more into the piece.
- word (first piece only): a whitespace after the ``first_chunk_words``-th word or
  later, outside quotes and brackets, unless the word is a function word, a number,
  amount or ordinal (``3rd``), a title, or ends with ``.``, ``…``, ``?``, ``!`` or a
  hyphen; cut at the whitespace.
- forced: no cut by ``max_chars`` characters of content. Cut at the last whitespace
  in the window that follows a speakable word (searching back over half the window),
  else at the last whitespace, else exactly at ``max_chars``. A natural cut before the
  limit always wins and one after it never does.
"""

# Full-width clause marks, dashes and curly quotes are this module's subject, so
# ruff's "ambiguous character" checks do not apply.
# ruff: noqa: RUF001, RUF002

from __future__ import annotations

from .lexicon import FUNCTION_WORDS, INTERJECTIONS, TITLES, Lexicon
from .pending import Cut, PendingText
from .quotes import WORD_OPENERS

CLAUSE_MARKS = frozenset(",;:")
CJK_CLAUSE_MARKS = frozenset("，；：、")
EM_DASH = "—"
SPACED_DASHES = frozenset("-–")
_WORD_TRAIL = "\"”’'“)]}»«」』）,;:"


def speakable_end(word: str, lex: Lexicon) -> bool:
    """May a piece end after ``word`` (a non-space run) without sounding cut off?"""
    core = word.lstrip(WORD_OPENERS).rstrip(_WORD_TRAIL).lower().replace("’", "'")
    if not any(c.isalnum() for c in core):
        return False
    if core in FUNCTION_WORDS or core in TITLES or core.endswith((".", "…", "-", "–")):
        return False
    # "?" or "!" that the sentence rules did not take for an end ('"Why?" she asked').
    if core.endswith(("?", "!")) or lex.is_ordinal(core):
        return False
    # A number or amount: a unit or "a.m." usually follows ("10 percent", "$3 million").
    return not (any(c.isdigit() for c in core) and not any(c.isalpha() for c in core))


class PhraseCuts(PendingText):
    """The clause and forced cuts (the scan applies the word cut's conditions itself,
    on every whitespace of the first piece)."""

    def _clause_ok(self, pos: int) -> bool:
        if self.stack:
            return False
        if self.first:
            if self.words == 1 and self.first_word in INTERJECTIONS:
                return True  # "Sure, …", "Well, …": a natural pause after one word
            return self.words >= max(1, self.rules.min_clause_words)
        return self.words >= 1 and pos - self.lead >= self.rules.clause_chars

    def _dash(self, i: int, ch: str, *, spaced: bool) -> Cut | None:
        if not self._clause_ok(i + 1):
            return None
        j = i + 1
        while (nxt := self._at(j, j)) == ch:
            j += 1
        if nxt == "" or (spaced and (j - i > 3 or not nxt.isspace())):
            return None
        return Cut(j, "clause") if self._clause_ok(j) else None

    def _forced(self, limit: int) -> Cut:
        text, lead = self.text, self.lead
        half = lead + self.rules.max_chars // 2
        fallback = 0
        for w in range(limit, lead, -1):
            if text[w].isspace() and not text[w - 1].isspace() and not self._in_code(w):
                fallback = fallback or w
                if w < half:
                    break
                s = w - 1
                while s > lead and not text[s - 1].isspace():
                    s -= 1
                if speakable_end(text[s:w], self.lexicon):
                    return Cut(w, "forced")
        return Cut(fallback or limit, "forced")

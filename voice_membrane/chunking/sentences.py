"""Where a sentence ends: the rules for ``. ! ? …`` and the closers after them.

A sentence ends at a run of ``. ! ? …`` plus optional closers (``" ” “ ’ ' ) ] » «``
…) and then whitespace (required, so ``3.14``, ``?!``, ``...`` and ``example.com``
hold together); the cut falls after the closers. CJK ``。！？`` need no whitespace.
Not an end: inside an open quote or bracket; ``.`` after a title or an abbreviation
that never ends a sentence (``Dr.``, ``e.g.``, ``z. B.``: the lexicon's never-end
table), after a capital initial (``J.``), inside a sequence of one-letter
abbreviations (``d. h.``), after a list number (first on its line or in the piece,
or after ``: ; . ! ? (``: ``To reset it: 1. Hold``) or an ordinal (a number after a
word of the lexicon's ordinal context: ``zum 12.``). Soft, so an end unless a
lowercase word follows (after a number, also a digit or a month: ``the 3. exit``,
``bis zum 12. März``): any other ``.``. Ambiguous, so an end only if a new sentence
visibly starts, a newline comes first, or the text ends: ``.`` after an abbreviation
that may end a sentence (``etc.``, ``a.m.``, ``U.S.``), after the last of a
one-letter sequence (``u. a.``), an ellipsis, and a cluster whose closers close an
open quote or are quotes (``"Stop!" he said``, ``'Why?' she asked``). A new sentence
visibly starts with a capitalised common opener (``It``, ``The``, ``Then``,
``However``, and the language's own: ``Lexicon.openers``), optionally after an
opening quote or bracket, or with a letter of a caseless script (CJK). Other
capitalised words are read as names (``the U.S. Postal Service``); digits and
lowercase continue the sentence (``at 10 a.m. 5 days``, ``10 a.m. today``).
"""

# Unicode punctuation (full-width CJK marks, curly quotes) is this module's subject,
# so ruff's "ambiguous character" checks do not apply.
# ruff: noqa: RUF001, RUF002

from __future__ import annotations

import re

from .lexicon import MONTHS
from .pending import Cut, PendingText
from .quotes import WORD_OPENERS, track_quote

TERMINALS = frozenset(".!?…。！？")
_CJK_TERMINALS = frozenset("。！？")
_DEFINITE = frozenset("!?。！？")
_CLOSERS = frozenset("\"”’')]»«“」』）】〕〉》")
_QUOTES = frozenset("\"”’'»«“")
_SPACES = " \t\u00a0\u202f"
_ITEM_BEFORE = frozenset(":;,.!?…(\n")  # a numeral after these (or first) begins an item
_INITIALS = re.compile(r"[A-Z](?:\.[A-Z])+")  # "J.K" (before its final period)
_DOTTED = re.compile(r"[a-z](?:\.[a-z])+")  # "a.m", "e.g"

# Verdicts on a period: an end; an end unless a lowercase word follows ("soft"); the
# same for a numeral, where a digit or a month also continues ("3. exit", "12. März");
# an end only if a new sentence visibly starts ("maybe"); never an end.
_END, _SOFT, _NUMERAL, _MAYBE, _NO = "end", "soft", "numeral", "maybe", "no"


class SentenceEnds(PendingText):
    """The sentence-end rules, applied at a terminal mark of the pending text."""

    def _sentence(self, i: int) -> Cut | None:
        text = self.text
        j = i + 1
        while self._at(j, j) in TERMINALS:
            j += 1
        k = j
        while True:
            while (nxt := self._at(k, k)) in _CLOSERS:
                k += 1
            guillemet = self._spaced_guillemet(k, nxt)
            if guillemet < 0:
                break
            k = guillemet + 1
        if nxt == "":
            return None  # the text ends here: the rest is the final piece
        cluster = text[i:j]
        if _CJK_TERMINALS.isdisjoint(cluster) and not nxt.isspace():
            return None
        stack = self.stack.copy()
        for q in range(j, k):
            track_quote(stack, text[q], text[q - 1])
        if stack:
            return None  # still inside a quote or bracket
        verdict = self._classify(i, cluster, k)
        if verdict == _NO:
            return None
        if self.stack or not _QUOTES.isdisjoint(text[j:k]):
            verdict = _MAYBE  # its closers closed a quote: '"Stop!" he said' goes on
        if verdict == _MAYBE and not self._new_sentence_at(k):
            return None
        if verdict in (_SOFT, _NUMERAL) and self._continues_at(k, verdict == _NUMERAL):
            return None
        return Cut(k, "sentence")

    def _spaced_guillemet(self, k: int, nxt: str) -> int:
        """French spacing: the "»" of "Il pleut ? »" closes like "Il pleut?»" (its
        index), when an open « waits for it; else -1."""
        if not nxt or nxt not in _SPACES or not any("»" in c for c in self.stack):
            return -1
        m = k
        while (x := self._at(m, k)) and x in _SPACES:
            m += 1
        return m if x == "»" else -1

    def _classify(self, i: int, cluster: str, k: int) -> str:
        if not _DEFINITE.isdisjoint(cluster):
            return _END
        if cluster != ".":
            return _MAYBE  # an ellipsis
        text, lex = self.text, self.lexicon
        ws = self._word_start(i)
        core = text[ws:i].lstrip(WORD_OPENERS).replace("’", "'")
        low = core.lower()
        if not core:
            return _SOFT
        if len(core) == 1 and core.isalpha():
            return self._letter(ws, core, k)
        if low + "." in lex.never_end:
            return _NO
        if core.isdigit():
            return self._numeral(ws, core)
        if low + "." in lex.maybe_end:
            return _MAYBE
        if _INITIALS.fullmatch(core):
            return _NO  # "J.K. Rowling"
        return _MAYBE if _DOTTED.fullmatch(low) else _SOFT

    def _word_start(self, i: int) -> int:
        ws = i
        while ws > 0 and not self.text[ws - 1].isspace():
            ws -= 1
        return ws

    def _letter(self, ws: int, core: str, k: int) -> str:
        """A period after a one-letter word: an initial, or part of "d. h.", "e. g."."""
        letters = [core]
        p = ws
        while True:  # the one-letter abbreviations just before: "d." before "h."
            q = p
            while q > 0 and self.text[q - 1] in _SPACES:
                q -= 1
            if q < 2 or q == p or self.text[q - 1] != ".":
                break
            prev = self._word_start(q - 1)
            if q - 1 - prev != 1 or not self.text[prev].isalpha():
                break
            letters.insert(0, self.text[prev])
            p = prev
        if self._letter_follows(k):
            return _NO  # more of the sequence follows: never cut inside it
        abbrev = ".".join(letters).lower() + "."
        if abbrev in self.lexicon.never_end:
            return _NO
        if len(letters) > 1 or abbrev in self.lexicon.maybe_end:
            return _MAYBE
        if core.isupper() and core != "I":
            return _NO  # an initial: "J. K. Rowling"
        return _SOFT

    def _letter_follows(self, k: int) -> bool:
        """Is the next word a one-letter abbreviation ("h." after "d. ")?"""
        m = k
        while (x := self._at(m, k)) in _SPACES and x:
            m += 1
        return x.isalpha() and self._at(m + 1, k) == "."

    def _numeral(self, ws: int, core: str) -> str:
        """A period after a number: a list item, an ordinal, or a sentence end."""
        q = ws
        while q > 0 and self.text[q - 1] in _SPACES:
            q -= 1
        if (q == 0 and self.line_start) or (q and self.text[q - 1] == "\n"):
            return _NO  # a list number: "1. First"
        before = self.text[self._word_start(q) : q].lstrip(WORD_OPENERS).lower()
        lex = self.lexicon
        if q and before in lex.ordinal_context:
            return _NO  # an ordinal: "zum 12. März", "der 3. Platz"
        abbreviation = before in lex.never_end or before in lex.maybe_end  # "Nr. 5."
        if len(core) <= 3 and (q == 0 or self.text[q - 1] in _ITEM_BEFORE) and not abbreviation:
            return _NO  # an item of an inline list: "To reset it: 1. Hold …"
        if core == "1":
            return _NO  # a list's first item, even without a lead-in: "Du brauchst 1. Mehl"
        if len(core) <= 3 and self._item_before(ws, int(core) - 1):
            return _NO  # the next item of a list run into one line: "1. Milk 2. Eggs"
        return _NUMERAL

    def _item_before(self, ws: int, number: int) -> bool:
        """Is ``number.`` an earlier word of this piece ("1." before "2.")?"""
        return re.search(rf"(?:^|[\s(]){number}\.\s", self.text[:ws]) is not None

    def _continues_at(self, k: int, numeral: bool) -> bool:
        """Does the sentence go on after the period: a lowercase word follows, or after
        a numeral a digit or a month ("3. exit", "am 3. Oktober")?"""
        m = k
        while (x := self._at(m, k)).isspace() and x != "\n":
            m += 1
        if x.islower():
            return True
        if not numeral or not x.isalnum():
            return False
        if x.isdigit():
            return True
        e = m + 1
        while self._at(e, k).isalpha():
            e += 1
        return self._span(m, e).lower() in MONTHS

    def _new_sentence_at(self, k: int) -> bool:
        """Does a new sentence visibly start after the whitespace at ``k``?"""
        m = k
        while (x := self._at(m, k)).isspace() and x != "\n":
            m += 1
        if x in ("", "\n"):
            return True
        if x in WORD_OPENERS:
            m += 1
            x = self._at(m, k)
        if x == "" or (x.isalpha() and not x.isupper() and not x.islower()):
            return True  # the text ends, or a caseless script (CJK) follows
        if not x.isupper():
            return False
        e = m + 1
        while (y := self._at(e, k)).isalpha() or y in ("'", "’"):
            e += 1
        return self._span(m, e).lower().replace("’", "'") in self.lexicon.openers

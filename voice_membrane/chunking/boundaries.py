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
- sentence: a run of ``. ! ? …`` plus optional closers (``" ” “ ’ ' ) ] » «`` …) and
  then whitespace (required, so ``3.14``, ``?!``, ``...`` and ``example.com`` hold
  together); cut after the closers. CJK ``。！？`` need no whitespace. Not an end:
  inside an open quote or bracket; ``.`` after a title or an abbreviation that never
  ends a sentence (``Dr.``, ``e.g.``, ``z. B.``: the lexicon's never-end table), after
  a capital initial (``J.``), inside a sequence of one-letter abbreviations (``d. h.``),
  after a list number (first on its line or in the piece, or after ``: ; . ! ? (``:
  ``To reset it: 1. Hold``) or an ordinal (a number after a word of the lexicon's
  ordinal context: ``zum 12.``). Soft, so an end unless a lowercase word follows
  (after a number, also a digit or a month: ``the 3. exit``, ``bis zum 12. März``):
  any other ``.``. Ambiguous, so an end only if a new sentence visibly starts, a
  newline comes first, or the text ends: ``.`` after an abbreviation that may end a
  sentence (``etc.``, ``a.m.``, ``U.S.``), after the last of a one-letter sequence
  (``u. a.``), an ellipsis, and a cluster whose closers close an open quote or are
  quotes (``"Stop!" he said``, ``'Why?' she asked``). A new sentence visibly starts
  with a capitalised common opener (``It``, ``The``, ``Then``, ``However``, and the
  language's own: ``Lexicon.openers``), optionally after an opening quote or
  bracket, or with a letter of a caseless script (CJK). Other capitalised words are
  read as names (``the U.S. Postal Service``); digits and lowercase continue the
  sentence (``at 10 a.m. 5 days``, ``10 a.m. today``).
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

Quote and bracket tracking covers ``()``, ``[]``, ``“”``, ``„“``, ``„”``, ``«»``,
``»«``, ``「」``, ``『』``, ``（）`` and straight ``"``, which opens only at a word start
(so the inch mark in ``6" pipe`` opens nothing), as does ``»``. Unmatched closers are
ignored; apostrophes and single quotes are not tracked. Tracking restarts with every
piece.

Inline code (``code``: the markdown filter's marks) holds no mark, quote or bracket,
and no cut falls inside it; a forced cut takes a space outside it if it can.
"""

# Unicode punctuation (full-width CJK marks, dashes, curly quotes) is this module's
# subject, so ruff's "ambiguous character" checks do not apply.
# ruff: noqa: RUF001, RUF002

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .lexicon import (
    DEFAULT_LEXICON,
    FUNCTION_WORDS,
    INTERJECTIONS,
    MONTHS,
    TITLES,
    Lexicon,
)

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


_TERMINALS = frozenset(".!?…。！？")
_CJK_TERMINALS = frozenset("。！？")
_DEFINITE = frozenset("!?。！？")
_CLOSERS = frozenset("\"”’')]»«“」』）】〕〉》")
_QUOTES = frozenset("\"”’'»«“")
# Opener -> the closers that close it: „…“ (German) or „…” (Polish); «…» or »…«/»…».
_PAIRS = {
    "(": ")", "[": "]", "“": "”", "„": "“”", "«": "»", "»": "«»",
    "「": "」", "『": "』", "（": "）",
}  # fmt: skip
_CLOSING = frozenset("".join(_PAIRS.values()))
_OPENERS = "\"'“‘„«»([{「『（"
_WORD_TRAIL = "\"”’'“)]}»«」』）,;:"
_SPACES = " \t\u00a0\u202f"
_ITEM_BEFORE = frozenset(":;,.!?…(\n")  # a numeral after these (or first) begins an item
_CLAUSE_MARKS = frozenset(",;:")
_CJK_CLAUSE_MARKS = frozenset("，；：、")
_EM_DASH = "—"
_SPACED_DASHES = frozenset("-–")
_INITIALS = re.compile(r"[A-Z](?:\.[A-Z])+")  # "J.K" (before its final period)
_DOTTED = re.compile(r"[a-z](?:\.[a-z])+")  # "a.m", "e.g"

# Verdicts on a period: an end; an end unless a lowercase word follows ("soft"); the
# same for a numeral, where a digit or a month also continues ("3. exit", "12. März");
# an end only if a new sentence visibly starts ("maybe"); never an end.
_END, _SOFT, _NUMERAL, _MAYBE, _NO = "end", "soft", "numeral", "maybe", "no"


class _Undecided(Exception):
    """The decision needs unseen text; the cut it concerns is at ``pos`` or later."""

    def __init__(self, pos: int) -> None:
        super().__init__(pos)
        self.pos = pos


def find_cut(
    text: str,
    *,
    first: bool,
    final: bool,
    line_start: bool,
    rules: CutRules,
    code: Sequence[bool] = (),
) -> Cut | None:
    """Return the earliest eligible cut in ``text``, or None if none is decided yet.

    ``first``: this is the stream's first piece. ``final``: the stream ends after
    ``text``. ``line_start``: ``text`` begins a line (stream start or after a newline).
    ``code``: per character of ``text``, whether it is inside inline code (none is
    when shorter). A cut at ``len(text)`` only follows a newline or a full-width clause
    mark; any other end of the text is left to the caller (with ``final``, it is the
    last piece).
    """
    return _Scan(text, first, final, line_start, rules, code).run()


def _is_cjk(ch: str) -> bool:
    return (
        "\u3040" <= ch <= "\u30ff"  # kana
        or "\u3400" <= ch <= "\u4dbf"
        or "\u4e00" <= ch <= "\u9fff"
        or "\uf900" <= ch <= "\ufaff"
    )


def _track(stack: list[str], ch: str, prev: str) -> None:
    """Update the open quotes/brackets ``stack`` (each entry: its closers) with ``ch``."""
    word_start = prev == "" or prev.isspace() or prev in _PAIRS
    if ch == '"':
        if '"' in stack:
            _close(stack, ch)
        elif word_start:
            stack.append(ch)
    # Closing first: "“" closes a German „ and opens an English quote, "»" closes «.
    elif ch in _CLOSING and any(ch in closers for closers in stack):
        _close(stack, ch)
    elif ch in _PAIRS and (ch != "»" or word_start):
        stack.append(_PAIRS[ch])


def _close(stack: list[str], closer: str) -> None:
    while closer not in stack.pop():
        pass


def _word_at(text: str, i: int) -> str:
    """The run of letters starting at ``text[i]``."""
    j = i
    while j < len(text) and text[j].isalpha():
        j += 1
    return text[i:j]


def _speakable_end(word: str, lex: Lexicon) -> bool:
    """May a piece end after ``word`` (a non-space run) without sounding cut off?"""
    core = word.lstrip(_OPENERS).rstrip(_WORD_TRAIL).lower().replace("’", "'")
    if not any(c.isalnum() for c in core):
        return False
    if core in FUNCTION_WORDS or core in TITLES or core.endswith((".", "…", "-", "–")):
        return False
    # "?" or "!" that the sentence rules did not take for an end ('"Why?" she asked').
    if core.endswith(("?", "!")) or lex.is_ordinal(core):
        return False
    # A number or amount: a unit or "a.m." usually follows ("10 percent", "$3 million").
    return not (any(c.isdigit() for c in core) and not any(c.isalpha() for c in core))


class _Scan:
    def __init__(
        self,
        text: str,
        first: bool,
        final: bool,
        line_start: bool,
        rules: CutRules,
        code: Sequence[bool],
    ) -> None:
        self.text = text
        self.code = code
        self.lexicon = rules.lexicon
        self.first = first
        self.final = final
        self.line_start = line_start
        self.rules = rules
        self.lead = len(text) - len(text.lstrip())
        self.stack: list[str] = []
        self.words = 0  # words so far: runs with a letter or digit, plus each CJK character
        self.first_word = ""  # the piece's first word, lowercased

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
            except _Undecided as undecided:
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
            _track(self.stack, ch, text[i - 1] if i else "")
        return self._forced(limit) if n > limit else None

    def _in_code(self, i: int) -> bool:
        return i < len(self.code) and self.code[i]

    def _at(self, i: int, cut: int) -> str:
        """``text[i]``, ``""`` past the end of the stream; undecided if not yet known."""
        if i < len(self.text):
            return self.text[i]
        if self.final:
            return ""
        raise _Undecided(cut)

    def _candidate(self, i: int, ch: str, run_start: int) -> Cut | None:
        text = self.text
        if ch == "\n":
            return Cut(i + 1, "sentence")
        if ch in _TERMINALS:
            return None if i and text[i - 1] in _TERMINALS else self._sentence(i)
        if ch in _CLAUSE_MARKS:
            if not self._clause_ok(i + 1):
                return None
            nxt = self._at(i + 1, i + 1)
            return Cut(i + 1, "clause") if nxt.isspace() else None
        if ch in _CJK_CLAUSE_MARKS:
            return Cut(i + 1, "clause") if self._clause_ok(i + 1) else None
        if ch == _EM_DASH and (i == 0 or text[i - 1] != _EM_DASH):
            return self._dash(i, ch, spaced=False)
        if ch in _SPACED_DASHES and i > 0 and text[i - 1].isspace():
            return self._dash(i, ch, spaced=True)
        if self.first and ch.isspace() and run_start >= 0:
            words_ok = self.words >= self.rules.first_chunk_words
            if words_ok and not self.stack and _speakable_end(text[run_start:i], self.lexicon):
                return Cut(i, "word")
        return None

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

    def _sentence(self, i: int) -> Cut | None:
        text = self.text
        j = i + 1
        while self._at(j, j) in _TERMINALS:
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
            _track(stack, text[q], text[q - 1])
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
        core = text[ws:i].lstrip(_OPENERS).replace("’", "'")
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
        before = self.text[self._word_start(q) : q].lstrip(_OPENERS).lower()
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
        return self.text[m:e].lower() in MONTHS

    def _new_sentence_at(self, k: int) -> bool:
        """Does a new sentence visibly start after the whitespace at ``k``?"""
        m = k
        while (x := self._at(m, k)).isspace() and x != "\n":
            m += 1
        if x in ("", "\n"):
            return True
        if x in _OPENERS:
            m += 1
            x = self._at(m, k)
        if x == "" or (x.isalpha() and not x.isupper() and not x.islower()):
            return True  # the text ends, or a caseless script (CJK) follows
        if not x.isupper():
            return False
        e = m + 1
        while (y := self._at(e, k)).isalpha() or y in ("'", "’"):
            e += 1
        return self.text[m:e].lower().replace("’", "'") in self.lexicon.openers

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
                if _speakable_end(text[s:w], self.lexicon):
                    return Cut(w, "forced")
        return Cut(fallback or limit, "forced")

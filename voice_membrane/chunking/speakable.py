"""Make markdown-free text speakable: URLs, e-mail addresses and symbols.

``SpeakableFilter`` reads ``Segment``\\ s (``MarkdownFilter``'s output) and writes
``Segment``\\ s, streaming: it holds back only what it cannot decide yet, and its
output does not depend on how its input was split.

- **URLs** (with ``urls``): a word that is a URL — ``http://``, ``https://`` or
  ``ftp://`` plus a host, ``www.`` plus a host, or a bare domain followed by a path
  (``example.com/reset``) — is said as its host, without ``www.``, a port or
  credentials: ``https://help.example.com/reset?x=1`` → ``help.example.com``.
  Trailing sentence punctuation is not part of it (``…/88231.`` keeps its period),
  nor are the brackets of ``(https://…)`` or ``<https://…>`` (the angle brackets of
  an autolink are dropped). A word is held until it ends (whitespace or a
  character outside printable ASCII follows), which a cut needs anyway.
- **E-mail addresses** (with ``urls``): ``name@example.com`` (or
  ``mailto:name@example.com``) → ``name at example.com``.
- **Symbols** (with ``symbols``): emoji and pictographs, arrows, box drawing,
  geometric shapes, dingbats (``✓``, ``★``), decorative bullets (``•``), private-use
  characters and U+FFFD are not said, with everything that joins them into one
  glyph (ZWJ sequences, variation selectors, skin tones, keycaps, flag tags). A
  symbol run between two words becomes a space; one after whitespace or at a line
  start is dropped with the blanks after it; one before punctuation or whitespace
  is dropped. Kept, because a voice reads them meaningfully: letters, digits,
  punctuation, currency (``$ € £``), math (``+ = % ± ×``), ``&``, ``@``, ``°``,
  ``№``, ``℃``, ``℉``. Joiners are dropped wherever they stand (``1️⃣`` → ``1``;
  a keycap counts as a symbol, so ``1️⃣now`` → ``1 now``). A symbol run is dropped
  as it arrives; only the space it may leave waits for the character after it.
- A word of ``2048`` or more characters is no URL or address: it is copied as it
  comes instead of being held (a long hash cannot stall speech).
- When the stream pauses, ``release_word`` lets the word held so far go out
  (``SpeechChunker.flush_held``), if what it says cannot change however the word
  goes on: it has no ``/``, ``@`` or ``:`` and does not begin like a scheme,
  ``www.`` or ``mailto:``, so a URL or an address it may yet become is said
  beginning with it (``example`` of ``example.com/reset``). The rest of the word
  is said when it ends, as the whole word would be, less what went out.
"""

# Symbols, quotes and bullets are this module's subject, so ruff's "ambiguous
# character" checks do not apply.
# ruff: noqa: RUF001, RUF002

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from .held import HeldText
from .markdown import Segment

_WORD_MAX = 2048  # a longer word is no URL or address: it is not held
# Where a URL, an e-mail address or a symbol may be: anything else is copied in runs.
_HIT = re.compile(r"[@/]|www\.|[^\x00-\x7f]", re.IGNORECASE)
_OPEN = "([<\"'"  # may stand before a URL in the same word
_TRAIL = ".,;:!?\"'>*_"  # sentence punctuation after a URL is not part of it
_SCHEME = re.compile(r"(?:https?|ftp)://|www\.", re.IGNORECASE)
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN = rf"{_LABEL}(?:\.{_LABEL})*\.[A-Za-z]{{2,}}"
# A domain without a scheme counts only with a common top-level domain and a path:
# "example.com/reset" is a URL, "node.js/npm" and "README.md/x" are not.
_TLDS = (
    "com|org|net|edu|gov|mil|int|io|co|ai|dev|app|info|biz|me|tv|us|uk|de|fr|es|it|nl|"
    "eu|ca|au|jp|cn|in|br|ru|ch|se|no|dk|fi|pl|be|at|nz|ie|pt|mx|ar|kr|za"
)
_BARE_URL = re.compile(
    rf"({_DOMAIN})(?::\d+)?/\S*",
)
_BARE_TLD = re.compile(rf"\.(?:{_TLDS})$", re.IGNORECASE)
_EMAIL = re.compile(rf"(?:mailto:)?([A-Za-z0-9._%+-]+)@({_DOMAIN})", re.IGNORECASE)
_HOST_END = re.compile(r"[/?#]")
_PORT = re.compile(r":\d*$")

_KEEP = frozenset("°№℃℉")
_BULLETS = frozenset("•‣⁃∙")
_JOINERS = frozenset("\u200d")
# Dropped wherever they are: they only ask for a glyph's emoji presentation.
_PRESENTATION = frozenset("\ufe0e\ufe0f\u20e3")
_AFTER_SYMBOL_DROP = frozenset(".,;:!?…)]}\"'”’»")

_SYMBOL, _JOINER = 1, 2


# A held word whose spoken form may begin otherwise: a prefix of (or a word starting
# with) a scheme, www. or mailto:, which are left out when it is said.
_MAY_CHANGE_START = re.compile(
    r"(?i)(?:h(?:t(?:t(?:p(?:s)?)?)?)?|f(?:t(?:p)?)?|w(?:w(?:w)?)?|m(?:a(?:i(?:l(?:t(?:o)?)?)?)?)?)"
    r"(?:$|[:./])"
)


_LEADING_WORD = re.compile(r"[^\W_]+")  # letters and digits: said as they are in any word
# A word holding one of these may be said otherwise than it is written (a URL's path
# and port are left out, an address's "@" is said "at"): it is not released early.
_MAY_CHANGE = frozenset("/@:")


def _sure_start(word: str) -> bool:
    """Whether every word beginning with ``word`` is said beginning with it."""
    core = word.lstrip(_OPEN)
    if "<" in word[: len(word) - len(core)]:  # an autolink's bracket is dropped
        return False
    return not (_MAY_CHANGE_START.match(core) or any(ch in _MAY_CHANGE for ch in core))


def _is_word_char(ch: str) -> bool:
    """Part of a word that may be a URL or an address: printable ASCII but the space."""
    return "!" <= ch <= "~"


def _kind(ch: str) -> int:
    """_SYMBOL (not said), _JOINER (part of a symbol's glyph) or 0 (said)."""
    o = ord(ch)
    if o < 0x80 or ch in _KEEP:
        return 0
    if (
        ch in _JOINERS
        or ch in _PRESENTATION
        or 0xFE00 <= o <= 0xFE0F
        or 0x1F3FB <= o <= 0x1F3FF  # skin tones
        or 0xE0000 <= o <= 0xE01EF  # tags (subdivision flags), variation selectors
    ):
        return _JOINER
    if 0x1F000 <= o <= 0x1FAFF or ch in _BULLETS:  # emoji, also ones newer than unicodedata
        return _SYMBOL
    category = unicodedata.category(ch)
    if category == "Me":  # enclosing marks: the keycap
        return _JOINER
    if category in ("So", "Co"):
        return _SYMBOL
    if 0x2190 <= o <= 0x21FF or 0x27F0 <= o <= 0x27FF or 0x2900 <= o <= 0x297F:
        return _SYMBOL  # arrows (category Sm, but read by name: "rightwards arrow")
    return 0


def host_of(url: str) -> str:
    """The host a URL is said as: no scheme, ``www.``, credentials, port or path."""
    scheme = _SCHEME.match(url)  # only at the start: "thewww.example.org" keeps its "www"
    rest = url[scheme.end() :] if scheme else url
    if rest.lower().startswith("www."):
        rest = rest[4:]
    m = _HOST_END.search(rest)
    host = rest[: m.start()] if m else rest
    host = host.rsplit("@", 1)[-1]  # user:password@ is never said
    return _PORT.sub("", host).rstrip(".")


def _speak_word(word: str) -> tuple[int, int, str] | None:
    """``(start, end, said)`` for the URL or address inside a whitespace-free word."""
    a, b = 0, len(word)
    while a < b and word[a] in _OPEN:
        a += 1
    while b > a:
        last = word[b - 1]
        if last in _TRAIL or (
            last in ")]" and word.count("(" if last == ")" else "[", a, b) < word.count(last, a, b)
        ):
            b -= 1
        else:
            break
    core = word[a:b]
    if not core:
        return None
    said: str | None = None
    if _SCHEME.match(core):
        host = host_of(core)
        said = host or None
    elif (m := _BARE_URL.fullmatch(core)) and _BARE_TLD.search(m.group(1)):
        said = host_of(core)
    elif m := _EMAIL.fullmatch(core):
        said = f"{m.group(1)} at {m.group(2)}"
    if said is None:
        return None
    if a and word[a - 1] == "<" and b < len(word) and word[b] == ">":
        a, b = a - 1, b + 1  # an autolink's brackets are markup
    return a, b, said


class SpeakableFilter:
    """Say URLs as hosts, e-mail addresses with "at", and drop symbols (see the
    module docstring). ``feed`` returns the segments it could decide; ``flush``
    ends the stream and resets the filter."""

    def __init__(self, *, urls: bool = True, symbols: bool = True) -> None:
        self._urls = urls
        self._symbols = symbols
        self._reset()

    def _reset(self) -> None:
        self._held = HeldText()
        self._last = ""  # the last character output ("" at the start)
        self._glyph = False  # inside a run of symbols and joiners being dropped
        self._glyph_gap = False  # that run held a symbol: it may need a space
        self._blanks = False  # dropping the blanks after a run that followed a space
        self._long = False  # inside a word too long to be a URL: copied as it is
        self._word_out = ""  # the start of the word being held, released by release_word

    def feed(self, segments: Iterable[Segment]) -> list[Segment]:
        self._held.add(segments)
        return self._run(final=False)

    def flush(self) -> list[Segment]:
        out = self._run(final=True)
        self._reset()
        return out

    def release_word(self) -> list[Segment]:
        """The stream paused: the word held so far, as it will be said, if nothing
        that follows can change that (see the module docstring); else nothing."""
        held = self._held
        word = held.text[held.pos :]
        if not word or self._glyph or self._blanks or self._long:
            return []
        if self._urls and not _sure_start(self._word_out + word):
            return []
        self._keep(len(word))
        self._word_out += word
        return held.take_out()

    def lookahead(self) -> str:
        """The letters that begin the word held back, when it is sure to begin so:
        a word is held only to see whether it is a URL or an address, and only a
        scheme (``https://``), ``www.`` or ``mailto:`` changes how one begins. Lets
        the chunker see the next word's first letter (a sentence end waits for it)
        without waiting for the word to end."""
        held = self._held.text[self._held.pos :]
        if self._glyph or self._blanks or not held[:1].isalnum():
            return ""
        if self._urls and _MAY_CHANGE_START.match(held):
            return ""
        lead = _LEADING_WORD.match(held)
        return lead.group() if lead else ""

    def _run(self, *, final: bool) -> list[Segment]:
        held = self._held
        text, n = held.text, len(held.text)
        # A word still arriving may yet turn into a URL or an address: hold it, unless
        # it is already too long to be one.
        limit, long_tail = n, False
        if not final:
            floor = max(held.pos, n - _WORD_MAX)
            while limit > floor and _is_word_char(text[limit - 1]):
                limit -= 1
            if n - limit >= _WORD_MAX:
                while limit > held.pos and _is_word_char(text[limit - 1]):
                    limit -= 1
                long_tail = True
        while held.pos < n:
            pos = held.pos
            if self._blanks:
                e = pos
                while e < n and text[e] in " \t":
                    e += 1
                held.drop(e - pos)
                self._blanks = e == n
                continue
            if self._glyph:
                if not self._glyph_step(pos, final):
                    break
                continue
            if self._word_out:  # the rest of a word whose start was released
                if not self._finish_word(pos, final):
                    break
                continue
            if self._long:
                e = pos
                while e < n and _is_word_char(text[e]):
                    e += 1
                self._keep(e - pos)
                self._long = e == n
                continue
            if pos >= limit:
                if not long_tail:
                    break
                self._long = True
                continue
            m = _HIT.search(text, pos, limit)
            if m is None:
                self._keep(limit - pos)
                continue
            k = m.start()
            if text[k] >= "\x80":
                if not (self._symbols and _kind(text[k])):
                    self._keep(k + 1 - pos)
                    continue
                self._keep(k - pos)
                self._glyph, self._glyph_gap = True, False
                continue
            self._word(k, limit)
        return held.take_out()

    def _word(self, k: int, limit: int) -> None:
        """Say the word around the URL or address hint at ``k``."""
        held, text = self._held, self._held.text
        a, b = k, k
        while a > held.pos and _is_word_char(text[a - 1]):
            a -= 1
        while b < limit and _is_word_char(text[b]):
            b += 1
        found = _speak_word(text[a:b]) if self._urls and b - a < _WORD_MAX else None
        if found is None:
            self._keep(b - held.pos)
            return
        start, end, said = found
        self._keep(a + start - held.pos)
        held.replace(end - start, said)
        self._last = said[-1]
        self._keep(b - held.pos)

    def _finish_word(self, pos: int, final: bool) -> bool:
        """Say the rest of a word ``release_word`` let out the start of: as the
        whole word is said, less that start. False: the word goes on past the text."""
        held, text, n = self._held, self._held.text, len(self._held.text)
        e = pos
        while e < n and _is_word_char(text[e]):
            e += 1
        whole = self._word_out + text[pos:e]
        if len(whole) >= _WORD_MAX:  # no URL or address: copied as it comes
            self._keep(e - pos)
            self._long, self._word_out = e == n, ""
            return True
        if e == n and not final:
            return False
        said = whole
        found = _speak_word(whole) if self._urls else None
        if found is not None:
            start, end, host = found
            said = whole[:start] + host + whole[end:]
        rest = said[len(self._word_out) :]
        if not said.startswith(self._word_out) or rest == text[pos:e]:
            self._keep(e - pos)  # (release_word lets out only a start that stays)
        elif e > pos:
            held.replace(e - pos, rest)
            if rest:
                self._last = rest[-1]
        self._word_out = ""
        return True

    def _glyph_step(self, pos: int, final: bool) -> bool:
        """Drop symbols and joiners from ``pos``; at the run's end, put a space for it
        if it stood between two words. False: the run goes on past the text."""
        held, text, n = self._held, self._held.text, len(self._held.text)
        e = pos
        while e < n and (kind := _kind(text[e])):
            self._glyph_gap = self._glyph_gap or kind == _SYMBOL or text[e] == "\u20e3"
            e += 1
        held.drop(e - pos)
        if e == n and not final:
            return False
        self._glyph = False
        if self._glyph_gap:
            if self._last == "" or self._last.isspace():
                self._blanks = True  # "✅ Done" → "Done"
            elif self._separates(text[e] if e < n else ""):
                held.insert(" ")  # "great🎉thanks" must not become one word
                self._last = " "
        return True

    def _keep(self, n: int) -> None:
        if n > 0:
            held = self._held
            self._last = held.text[held.pos + n - 1]
            held.keep(n)

    def _separates(self, nxt: str) -> bool:
        """Must a space stand for a dropped glyph between the output and ``nxt``?"""
        return not (nxt == "" or nxt.isspace() or nxt in _AFTER_SYMBOL_DROP)

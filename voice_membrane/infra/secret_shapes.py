"""What a secret looks like, as one linear-time pattern, and what a stream needs
to find one as its text arrives.

Shapes (ASCII only; a shape needs a start not glued to a key character before it):

- the vendors' keys: ``sk-…`` / ``sk_…`` (Anthropic ``sk-ant-api03-…``,
  ``sk-ant-admin01-…``; OpenAI ``sk-proj-…``, ``sk-svcacct-…``, legacy ``sk-`` +
  48; ElevenLabs ``sk_`` + hex): 20 or more key characters after the prefix, a
  digit or capital among the first 41 (so ``sk-learn`` or a slug is prose);
  Google ``AIza`` + 30 or more (not after a ``+`` or ``/`` either: base64);
- JWTs: ``eyJ…`` (a JSON header) ``.eyJ…`` (a JSON payload), the signature and
  any further parts;
- a bearer token: after ``Bearer`` and one space or tab, 16 or more token
  characters with a digit among the first 41; basic credentials: after
  ``Basic`` and one space or tab, 8 or more token characters with a digit,
  ``+``, ``/`` or ``=`` among the first 41.

``SecretPattern`` joins them with known values (``redact``'s secrets): in a
match, the bearer and basic credentials come first, then the values (longest first), then the
shapes. Every part of the pattern is decided within ``window`` characters of
where it starts, or is then a match that only grows through one character class
(``swallow``): a stream holds a bounded tail, and never re-reads more than that.

Invisible characters (``invisible.py``: zero-width space, soft hyphen, word
joiner…) do not hide a secret: a text that holds any is matched without them,
and a match covers the original span (``Found``), invisible characters and all;
a match grows through them too.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Final

from .invisible import INVISIBLE_CLASS, Folded, has_invisible, without_invisible

_KEY = r"A-Za-z0-9_\-"  # base64url: what the vendors' keys and JWT parts are made of
_TOKEN = r"A-Za-z0-9._~+/=\-"  # RFC 6750 token68
_GLUED = rf"(?<![{_KEY}])"  # a shape does not start inside a word of key characters
# ``AIza`` may stand by chance in an image's base64 (``sk-``, ``eyJ….eyJ`` cannot:
# ``-``, ``_`` and ``.`` are not base64): not after its ``+`` and ``/`` either.
_GLUED_B64 = rf"(?<![{_KEY}+/])"
_BEARER = r"(?:(?<=[Bb]earer[ \t])|(?<=BEARER[ \t]))"
_BASIC = r"(?:(?<=[Bb]asic[ \t])|(?<=BASIC[ \t]))"
_B64 = _TOKEN  # base64 in token68: a match ends where the characters of any shape do

_SCHEMES: Final = ("bearer", "basic")  # matched before known values: they cover a token whole
# name → (pattern, the characters a match grows through once it has matched)
_SHAPES: Final = {
    "bearer": (rf"{_BEARER}(?=[{_TOKEN}]{{0,40}}[0-9])[{_TOKEN}]{{16,}}", _TOKEN),
    "basic": (rf"{_BASIC}(?=[{_B64}]{{0,40}}[0-9+/=])[{_B64}]{{8,}}", _B64),
    "sk": (rf"{_GLUED}sk[-_](?=[{_KEY}]{{0,40}}[0-9A-Z])[{_KEY}]{{20,}}", _KEY),
    "aiza": (rf"{_GLUED_B64}AIza[{_KEY}]{{30,}}", _KEY),
    "jwt": (rf"{_GLUED}eyJ[{_KEY}]{{2,600}}\.eyJ[{_KEY}]{{2,}}(?:\.[{_KEY}]*)*", _KEY + "."),
}
# What a shape may begin with, up to where it is decided (at the end of the text
# so far), where it is not glued to a key character: a stream holds text from the
# first place where one of these (or a known value's beginning) starts.
_UNDECIDED_SHAPE: Final = re.compile(
    rf"(?:s(?:k(?:[-_][{_KEY}]{{0,40}})?)?"
    rf"|A(?:I(?:z(?:a[{_KEY}]{{0,29}})?)?)?"
    rf"|e(?:y(?:J(?:[{_KEY}]{{0,600}}(?:\.(?:e(?:y(?:J[{_KEY}]?)?)?)?)?)?)?)?)\Z"
)
_UNDECIDED_TOKEN: Final = re.compile(rf"[{_TOKEN}]{{0,40}}\Z")  # after "Bearer "
# The words a credential follows (and a space or tab), by their length.
_SCHEME_WORDS: Final = {
    n: frozenset(word + gap for word in words for gap in " \t")
    for n, words in ((7, ("Bearer", "bearer", "BEARER")), (6, ("Basic", "basic", "BASIC")))
}
_KEY_CHARS: Final = frozenset(string.ascii_letters + string.digits + "-_")
_SHAPES_WINDOW: Final = 620  # the longest undecided start above, and then some
# Before a bearer token: the most characters a look-behind reads.
CONTEXT: Final = 7
# Where a match can start: after each of these, by so many characters. A long
# text is searched by finding these (in C) and trying the pattern only there: a
# pattern that opens with look-behinds is tried at every character otherwise
# (a 1 MB image's data URL: 0.25 s).
_STARTS: Final = (
    *((head, 0) for head in ("sk-", "sk_", "AIza", "eyJ")),
    *((word, n) for n, words in _SCHEME_WORDS.items() for word in words),
)
_SHORT: Final = 256  # shorter than this, the pattern's own search is quicker
# The first letters of a shape's head (``SecretPattern.quiet``): a text that ends
# on one of them, not glued to a key character, may still begin a shape.
_HEAD_STARTS: Final = ("s", "sk", "A", "AI", "AIz", "e", "ey")


def might_hold_shape(text: str) -> bool:
    """Cheap: could ``text`` hold a shape at all? Substring tests in C for a
    shape's head or a scheme word's end, written out: ``any()`` over a tuple of
    them costs four times as much, and the secret stream asks on every delta."""
    return (
        "sk-" in text
        or "sk_" in text
        or "AIza" in text
        or "eyJ" in text
        or "earer" in text
        or "EARER" in text
        or "asic" in text
        or "ASIC" in text
    )


@dataclass(frozen=True, slots=True)
class Found:
    """A match, in the offsets of the text searched (its invisible characters
    counted): ``start()``, ``end()`` and the name of the part that matched."""

    span: tuple[int, int]
    lastgroup: str | None

    def start(self) -> int:
        return self.span[0]

    def end(self) -> int:
        return self.span[1]


class SecretPattern:
    """Known values (none with whitespace: a word never holds one) and the shapes."""

    def __init__(self, values: tuple[str, ...] = ()) -> None:
        folded = {without_invisible(v) for v in values}
        self.values = tuple(sorted({v for v in folded if v and not _has_space(v)}, key=len)[::-1])
        parts = [f"(?P<{name}>{_SHAPES[name][0]})" for name in _SCHEMES]
        if self.values:
            parts.append(f"(?P<value>{'|'.join(re.escape(v) for v in self.values)})")
        parts += [
            f"(?P<{name}>{pattern})"
            for name, (pattern, _) in _SHAPES.items()
            if name not in _SCHEMES
        ]
        self.regex = re.compile("|".join(parts))
        self._swallow = {
            name: re.compile(f"[{grow}{INVISIBLE_CLASS}]*") for name, (_, grow) in _SHAPES.items()
        }
        longest = max((len(v) for v in self.values), default=0)
        self.window = max(_SHAPES_WINDOW, longest)
        self._starts = (*_STARTS, *((value, 0) for value in self.values))
        self._by_first: dict[str, tuple[str, ...]] = {}
        for value in self.values:
            self._by_first[value[0]] = (*self._by_first.get(value[0], ()), value)
        # The values' beginnings (up to 4 characters): most words begin none.
        self._heads = frozenset(v[:n] for v in self.values for n in range(1, 5))
        # Where something may begin: a shape's first letter, a value's.
        firsts = "".join(sorted({"s", "A", "e", *self._by_first}))
        self._starts_at = re.compile(f"[{re.escape(firsts)}]")
        # What may begin a value: its head (a match holds its first 4 characters)
        # anywhere, or the first few of them at the end of the text.
        self._value_heads = tuple({v[:4] for v in self.values})
        self._value_starts = tuple({v[:n] for v in self.values for n in range(1, min(len(v), 4))})
        self._ends = (*_HEAD_STARTS, *self._value_starts)

    def quiet(self, text: str, start: int) -> bool:
        """Cheap and cautious: True only when no secret matches at or after
        ``start`` and none is undecided there (``search`` finds nothing,
        ``undecided`` is ``len(text)``), as it is for most pieces of prose.
        ``text`` holds the ``CONTEXT`` characters before ``start``, as those do.
        Substring tests in C: a scheme word's or a head's, anywhere, or the text
        ending on a head's first letters."""
        if not text.isascii() and has_invisible(text):
            return False
        if start > CONTEXT:
            text = text[start - CONTEXT :]
        if might_hold_shape(text):
            return False
        for head in self._value_heads:
            if head in text:
                return False
        return not text.endswith(self._ends) or self._quiet_end(text)

    def _quiet_end(self, text: str) -> bool:
        """The text ends on a head's first letters: only those glued to a key
        character before them (a word's ``s``, ``e``) begin no shape."""
        if text.endswith(self._value_starts):
            return False
        for first in _HEAD_STARTS:
            at = len(text) - len(first)
            if text.endswith(first) and (at <= 0 or text[at - 1] not in _KEY_CHARS):
                return False
        return True

    def search(self, text: str, pos: int = 0) -> Found | None:
        """The first match at or after ``pos`` (``regex.search``, in linear time)."""
        if text.isascii() or not has_invisible(text):  # (the common case, inline)
            match = self._search(text, pos)
            return None if match is None else Found(match.span(), match.lastgroup)
        folded = Folded(text)
        match = self._search(folded.folded, folded.at(pos))
        return None if match is None else _found(folded, match)

    def _search(self, text: str, pos: int) -> re.Match[str] | None:
        if len(text) - pos < _SHORT:
            return self.regex.search(text, pos)
        found: dict[str, int] = {}  # where each start was last found (-1: nowhere after)
        while True:
            first = -1
            for head, offset in self._starts:
                at = found.get(head)
                if at is None or (at != -1 and at + offset < pos):
                    at = found[head] = text.find(head, max(0, pos - offset))
                if at != -1 and (first == -1 or at + offset < first):
                    first = at + offset
            if first == -1:
                return None
            match = self.regex.match(text, first)
            if match is not None:
                return match
            pos = first + 1

    def sub(self, text: str, replacement: str) -> str:
        """``text`` with every match replaced (what a stream of it gives, whole)."""
        folded = Folded(text) if has_invisible(text) else None
        searched = text if folded is None else folded.folded
        out: list[str] = []
        pos = at = 0  # in ``searched``, in ``text``
        while (match := self._search(searched, pos)) is not None:
            found = Found(match.span(), None) if folded is None else _found(folded, match)
            out += (text[at : found.start()], replacement)
            pos, at = match.end(), found.end()
        if not out:
            return text
        out.append(text[at:])
        return "".join(out)

    def swallow(self, match: Found) -> re.Pattern[str]:
        """The characters a match at the end of the text so far may still grow
        through: invisible ones (a match takes those after it, as ``sub``
        does), and a shape's characters (a known value is exact)."""
        name = match.lastgroup
        return _INVISIBLES if name is None or name == "value" else self._swallow[name]

    def undecided(self, text: str, start: int) -> int:
        """The first place at or after ``start`` where a secret may begin that the
        text so far does not decide (``len(text)`` if none). Over-cautious is
        allowed (it only holds more); only the last word can be undecided."""
        if text.isascii() or not has_invisible(text):
            return self._undecided(text, start)
        folded = Folded(text)
        return folded.original(self._undecided(folded.folded, folded.at(start)))

    def _undecided(self, text: str, start: int) -> int:
        end = len(text)
        low = max(start, end - self.window)
        low = max(
            low, text.rfind(" ", low) + 1, text.rfind("\n", low) + 1, text.rfind("\t", low) + 1
        )
        for n, words in _SCHEME_WORDS.items():
            if low >= n and text[low - n : low] in words and _UNDECIDED_TOKEN.match(text, low):
                return low
        by_first = self._by_first
        found = self._starts_at.search(text, low)
        while found is not None:
            at = found.start()
            glued = at > 0 and text[at - 1] in _KEY_CHARS
            if not glued and _UNDECIDED_SHAPE.match(text, at):
                return at
            rest = end - at
            if text[at : at + 4] in self._heads and any(
                len(v) > rest and text.startswith(v[:rest], at) for v in by_first[text[at]]
            ):
                return at
            found = self._starts_at.search(text, at + 1)
        return end


_INVISIBLES: Final = re.compile(f"[{INVISIBLE_CLASS}]*")


def _found(folded: Folded, match: re.Match[str]) -> Found:
    """A match in ``folded.folded`` as the span of the text it was folded from."""
    return Found((folded.original(match.start()), folded.original(match.end())), match.lastgroup)


def _has_space(value: str) -> bool:
    return any(ch.isspace() for ch in value)


SHAPES: Final = SecretPattern()  # the shapes alone (``redact`` masks values by value)

__all__ = ["CONTEXT", "SHAPES", "Found", "SecretPattern", "might_hold_shape"]

"""The skeleton of spoken text: what a banned phrase is matched on.

Each character folds on its own, so a stream folds the same however it is
split: NFKD (compatibility forms: full-width ``ｓ``, ligatures ``ﬁ``,
mathematical ``𝐬``, superscripts), combining marks dropped (``é`` → ``e``),
Cyrillic, Greek and other look-alikes of Latin letters folded to them (``с`` →
``c``, ``ο`` → ``o``), case folded (``ß`` → ``ss``). Letters and digits stay.
Whitespace, punctuation, symbols and emoji become ``GAP``, a word break (a
voice reads ``secret-plan`` or ``secret.plan`` as two words). ``JOIN`` stands
for what may be nothing or a break: invisible characters (zero-width space and
joiners, word joiner, soft hyphen, BOM, other format and control characters,
Hangul fillers), apostrophes, and the markdown marks ``*``, ``_``, ``~`` and
the backtick left in the text (``se\\u00adcret``, ``sec**ret``, ``secret_plan``,
``secret\\u200bplan``). A letter that reads as ``l`` or ``I`` (the Cyrillic
palochka) becomes ``I_OR_L``.

``Skeleton`` keeps the skeleton of a text as it streams, a run of gaps
collapsed to one character, with each skeleton character's raw span, so that
what is cut is exactly the raw text a match covers.
"""

# Look-alike letters are this module's subject.
# ruff: noqa: RUF001, RUF002

from __future__ import annotations

import re
import unicodedata

GAP = " "  # a word break
JOIN = "\x1f"  # maybe nothing, maybe a break (never a letter: control characters fold to it)
GAPS = GAP + JOIN
# A letter that reads as "l" as well as "I": the phrase's "i" and "l" both match it.
I_OR_L = "\x01"
_I_OR_L = frozenset("\u04c0\u04cf\u01c0")  # Cyrillic palochka, the dental click

# Default-ignorable code points (Unicode's DerivedCoreProperties) that are not
# format, control or mark characters by category: the Hangul fillers are letters.
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0")
# Apostrophes, and the markdown marks a voice skips when they are left in the
# text (markdown off, or a mark the filter kept): ``sec**ret``, ``secret_plan``.
_JOINING = frozenset("'\u2019\u02bc\u2018`\u00b4\u02b9\u02bb*_~")
# Look-alikes of Latin letters (Unicode's confusables, the letters of scripts a
# Latin text is disguised with), folded before and after case folding.
_LOOKALIKES = str.maketrans(
    {
        # Cyrillic
        **dict.fromkeys("Аа", "a"),
        **dict.fromkeys("Вв", "b"),
        **dict.fromkeys("Сс", "c"),
        **dict.fromkeys("Ԁԁ", "d"),
        **dict.fromkeys("Ее", "e"),
        **dict.fromkeys("Һһ", "h"),
        **dict.fromkeys("Нн", "h"),
        **dict.fromkeys("Іі", "i"),
        **dict.fromkeys("Јј", "j"),
        **dict.fromkeys("Кк", "k"),
        **dict.fromkeys("Мм", "m"),
        **dict.fromkeys("Пп", "n"),
        **dict.fromkeys("Оо", "o"),
        **dict.fromkeys("Рр", "p"),
        **dict.fromkeys("Ԛԛ", "q"),
        **dict.fromkeys("Гг", "r"),
        **dict.fromkeys("Ѕѕ", "s"),
        **dict.fromkeys("Тт", "t"),
        **dict.fromkeys("Ԝԝ", "w"),
        **dict.fromkeys("Хх", "x"),
        **dict.fromkeys("УуҮү", "y"),
        **dict.fromkeys("Ьь", "b"),
        # Greek
        **dict.fromkeys("Αα", "a"),
        **dict.fromkeys("Ββ", "b"),
        **dict.fromkeys("Ϲϲ", "c"),
        **dict.fromkeys("Εε", "e"),
        **dict.fromkeys("Η", "h"),
        **dict.fromkeys("Ιιɩ", "i"),
        **dict.fromkeys("Ϳϳ", "j"),
        **dict.fromkeys("Κκ", "k"),
        **dict.fromkeys("Μ", "m"),
        **dict.fromkeys("Νη", "n"),
        **dict.fromkeys("Οο", "o"),
        **dict.fromkeys("Ρρ", "p"),
        **dict.fromkeys("Ττ", "t"),
        **dict.fromkeys("μυ", "u"),
        **dict.fromkeys("ν", "v"),
        **dict.fromkeys("ω", "w"),
        **dict.fromkeys("Χχ", "x"),
        **dict.fromkeys("Υγϒ", "y"),
        "Ζ": "z",
        # Armenian
        "օ": "o",
        "ս": "u",
        "հ": "h",
        "ո": "n",
        "ց": "g",
        "զ": "q",
        # Latin letters with no decomposition, and small capitals
        "ı": "i",
        "ȷ": "j",
        "ɑ": "a",
        "ɡ": "g",
        "ø": "o",
        "Ø": "o",
        "ł": "l",
        "Ł": "l",
        "đ": "d",
        "Đ": "d",
        "ħ": "h",
        "ŧ": "t",
        "ƀ": "b",
        "ɨ": "i",
        "ʉ": "u",
        **dict(zip("ᴀʙᴄᴅᴇɢʜɪᴊᴋʟᴍɴᴏᴘʀꜱᴛᴜᴠᴡʏᴢ", "abcdeghijklmnoprstuvwyz", strict=True)),
    }
)


def _is_ignorable(ch: str) -> bool:
    o = ord(ch)
    return (
        ch in _FILLERS
        or 0x2060 <= o <= 0x206F  # word joiner, invisible operators, deprecated formats
        or 0xFFF0 <= o <= 0xFFF8
        or 0xE0000 <= o <= 0xE0FFF  # tags
    )


def _fold(ch: str) -> str:
    """The skeleton of one character: letters and digits, ``GAP``, ``JOIN`` or ""."""
    if ch in _JOINING or _is_ignorable(ch):
        return JOIN
    if ch in _I_OR_L:
        return I_OR_L
    out: list[str] = []
    for part in unicodedata.normalize("NFKD", ch.translate(_LOOKALIKES)):
        # Case folding may make a mark (İ → i + dot): decompose again.
        folded = unicodedata.normalize("NFKD", part.translate(_LOOKALIKES).casefold())
        for c in folded.translate(_LOOKALIKES):
            category = unicodedata.category(c)
            if category in ("Mn", "Me"):
                continue  # a mark on the letter before
            if c.isspace():
                out.append(GAP)
            elif category[0] in "LN" or category == "Mc":
                out.append(c)
            elif category[0] == "C" or c in _JOINING or _is_ignorable(c):
                out.append(JOIN)  # format, control, private-use, unassigned
            else:
                out.append(GAP)  # punctuation, symbols, emoji
    return "".join(out)


_FOLDED: dict[str, str] = {}


def fold(ch: str) -> str:
    """``_fold``, remembered: a text's characters are few and repeat."""
    folded = _FOLDED.get(ch)
    if folded is None:
        folded = _FOLDED[ch] = _fold(ch)
    return folded


_ASCII = {c: _fold(chr(c)) for c in range(128)}  # one skeleton character each
_ASCII_RUNS = re.compile("[^ \x1f]+|[ \x1f]+")


class Skeleton:
    """The skeleton of a streamed text: ``text`` and, for each of its
    characters, the raw span ``[starts[i], ends[i])`` it comes from (offsets in
    all the raw text added). A run of gaps is one character: ``GAP`` if any of
    it is a break, else ``JOIN``; a dropped mark belongs to the character before it."""

    def __init__(self) -> None:
        self.text = ""
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.raw_len = 0  # the raw offset just after the last character added

    def add(self, raw: str) -> None:
        if raw.isascii():
            self._add_ascii(raw)
            return
        chars = list(self.text[-1:])  # the last character may grow (a gap run, a mark)
        starts, ends = self.starts, self.ends
        head = len(self.text) - len(chars)
        at = self.raw_len
        for ch in raw:
            folded = fold(ch)
            for c in folded:
                if c in GAPS and chars and chars[-1] in GAPS:
                    chars[-1] = GAP if GAP in (c, chars[-1]) else JOIN
                    ends[-1] = at + 1
                else:
                    chars.append(c)
                    starts.append(at)
                    ends.append(at + 1)
            if not folded and ends:
                ends[-1] = at + 1  # a mark: part of the character before it
            at += 1
        self.text = self.text[:head] + "".join(chars)
        self.raw_len = at

    def _add_ascii(self, raw: str) -> None:
        """``add`` for ASCII text: a skeleton character per raw one, runs at a time."""
        at = self.raw_len
        parts = [self.text]
        for run in _ASCII_RUNS.finditer(raw.translate(_ASCII)):
            a, b = at + run.start(), at + run.end()
            gap = run.group()
            if gap[0] not in GAPS:
                parts.append(gap)
                self.starts.extend(range(a, b))
                self.ends.extend(range(a + 1, b + 1))
                continue
            joined = GAP if GAP in gap else JOIN
            if parts[-1][-1:] in (GAP, JOIN):
                if joined == GAP and parts[-1][-1] != GAP:
                    parts[-1] = parts[-1][:-1] + GAP
                self.ends[-1] = b
            else:
                parts.append(joined)
                self.starts.append(a)
                self.ends.append(b)
        self.text = "".join(parts)
        self.raw_len = at + len(raw)

    def take(self, raw: int) -> str:
        """Remove and return the characters whose raw span ends at or before
        ``raw``; one that straddles it now starts there."""
        n = 0
        while n < len(self.starts) and self.ends[n] <= raw:
            n += 1
        taken = self.text[:n]
        if n:
            self.text = self.text[n:]
            del self.starts[:n], self.ends[:n]
        if self.starts and self.starts[0] < raw:
            self.starts[0] = raw
        return taken


def skeleton(text: str) -> str:
    """The skeleton of ``text`` as one string, gaps collapsed, without the gaps
    at either end."""
    s = Skeleton()
    s.add(text)
    return s.text.strip(GAPS)

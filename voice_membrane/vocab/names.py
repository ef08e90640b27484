"""When two names look alike: the key a participant name is compared by.

A transcript writes speakers as ``Name: text``, and a model reads names the way
a person does: ``claude``, ``Claude.``, ``Сlaude`` (a Cyrillic С), ``Ｃｌａｕｄｅ``
(full width) and ``Cl\u200baude`` (a zero-width space inside) are all Claude to
it. ``name_keys`` folds a name so that such spellings meet:

1. NFKC (full-width, mathematical and other compatibility forms become plain
   letters), then the invisible characters dropped (format characters such as
   zero-width spaces and joiners, soft hyphens, bidi controls; variation
   selectors; the Hangul fillers);
2. look-alike letters mapped to the Latin letter they look like: Cyrillic and
   Greek capitals and small letters, Latin small capitals, dotless i, and the
   digits 0 and 1 (a subset of Unicode's confusables, UTS #39, for the letters
   a name is written in);
3. case folded, every space removed and punctuation or symbols at either end
   stripped (``"Claude."``, ``" Claude "``, ``"**Claude**"``).

Two keys are made, with the capitals mapped before and after case folding, as
``I`` (capital i) looks like ``l`` while ``i`` does not: ``CIaude`` meets
``Claude`` and ``Ian`` still meets ``ian``. Two names look alike when a key of
one is a key of the other (``looks_alike``).
"""

# ruff: noqa: RUF001, RUF002, RUF003 (the look-alike letters are the point)

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from typing import Final

# Written in the turn lines of every format: a non-assistant name that looks like
# one of these would speak with the authority of the system or as the assistant.
SYSTEM_ROLE_NAMES: Final = ("System", "Developer")
ASSISTANT_ROLE_NAMES: Final = ("Assistant", "Model")
# The roles every chat template and the Human/Assistant transcripts use: a user
# line that starts like one of these is not a turn either.
ROLE_NAMES: Final = (*SYSTEM_ROLE_NAMES, *ASSISTANT_ROLE_NAMES, "Human", "User")

# Default-ignorable characters outside the format category: combining grapheme
# joiner, Hangul fillers, Mongolian variation selectors, variation selectors.
_IGNORABLE: Final = frozenset(
    "\u034f\u115f\u1160\u3164\uffa0\u180b\u180c\u180d\u180e\u180f"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
)


def _mapping(pairs: str) -> dict[int, str]:
    """``"аa вb"`` → {ord("а"): "a", ord("в"): "b"}."""
    return {ord(pair[0]): pair[1:] for pair in pairs.split()}


# Capitals and small letters by their own look (applied before case folding).
_BY_LOOK: Final = _mapping(
    # Cyrillic capitals, then small letters
    "АA ВB СC ЕE НH Іl ЈJ КK МM ОO РP ЅS ТT ХX УY ҮY ԚQ ԜW Ӏl ԀD "
    "аa вb сc еe һh іi јj кk мm нh оo рp ѕs тt хx уy үy ԛq ԝw ӏl ԁd ьb "
    # Greek capitals, then small letters
    "ΑA ΒB ΕE ΖZ ΗH Ιl ΚK ΜM ΝN ΟO ΡP ΤT ΥY ΧX ϹC ϺM "
    "αa βb εe ηn ιi κk μu νv οo ρp τt υu χx ϲc "
    # Latin small capitals and other letters
    "ᴀa ʙb ᴄc ᴅd ᴇe ɢg ʜh ɪi ᴊj ᴋk ʟl ᴍm ɴn ᴏo ᴘp ʀr ꜱs ᴛt ᴜu ᴠv ᴡw ʏy ᴢz "
    "ıi ȷj ɑa ɡg ǀl "
    # capital i, one and a bar look like a small L; zero like O
    "Il 1l |l 0O"
)
# Small letters as case folding leaves them (applied after it): Cyrillic and
# Greek small letters whose capital is a look-alike map to that capital's letter
# (``Н`` folds to ``н``, which must still meet ``h``).
_FOLDED: Final = {
    **_BY_LOOK,
    **_mapping("нh мm тt кk вb ηh μm νn υy 0o"),
}
del _FOLDED[ord("I")]  # not reached after case folding


def _visible(name: str) -> str:
    text = unicodedata.normalize("NFKC", name)
    return "".join(ch for ch in text if ch not in _IGNORABLE and unicodedata.category(ch) != "Cf")


def _trimmed(text: str) -> str:
    """No spaces anywhere, no punctuation or symbol at either end."""
    text = "".join(ch for ch in text if not ch.isspace())
    start, end = 0, len(text)
    while start < end and unicodedata.category(text[start])[0] in "PSZ":
        start += 1
    while end > start and unicodedata.category(text[end - 1])[0] in "PSZ":
        end -= 1
    return text[start:end]


def fold_keys(name: str) -> frozenset[str]:
    """The keys ``name`` is compared by (see the module docstring); empty for a
    name with no letter or digit left. ``name_keys`` is the same, cached."""
    text = _visible(name)
    keys = {
        _trimmed(text.casefold().translate(_FOLDED)),
        _trimmed(text.translate(_BY_LOOK).casefold().translate(_FOLDED)),
    }
    keys.discard("")
    return frozenset(keys)


name_keys: Final = lru_cache(maxsize=4096)(fold_keys)


def looks_alike(a: str, b: str) -> bool:
    """``a`` and ``b`` read as the same name (equal names included)."""
    return a == b or not name_keys(a).isdisjoint(name_keys(b))


def keys_of(names: Iterable[str]) -> frozenset[str]:
    """Every key of every name."""
    out: set[str] = set()
    for name in names:
        out |= name_keys(name)
    return frozenset(out)

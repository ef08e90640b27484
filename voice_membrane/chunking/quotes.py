"""Which quotes and brackets are open at a point of the pending text: no cut falls
inside one.

Quote and bracket tracking covers ``()``, ``[]``, ``“”``, ``„“``, ``„”``, ``«»``,
``»«``, ``「」``, ``『』``, ``（）`` and straight ``"``, which opens only at a word start
(so the inch mark in ``6" pipe`` opens nothing), as does ``»``. Unmatched closers are
ignored; apostrophes and single quotes are not tracked. Tracking restarts with every
piece.
"""

# Curly quotes and full-width brackets are this module's subject, so ruff's
# "ambiguous character" checks do not apply.
# ruff: noqa: RUF001, RUF002

from __future__ import annotations

# Opener -> the closers that close it: „…“ (German) or „…” (Polish); «…» or »…«/»…».
_PAIRS = {
    "(": ")", "[": "]", "“": "”", "„": "“”", "«": "»", "»": "«»",
    "「": "」", "『": "』", "（": "）",
}  # fmt: skip
_CLOSING = frozenset("".join(_PAIRS.values()))
# What may stand before a word's first letter (tracked or not): stripped to find the word.
WORD_OPENERS = "\"'“‘„«»([{「『（"


def track_quote(stack: list[str], ch: str, prev: str) -> None:
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

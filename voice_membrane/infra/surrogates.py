"""Lone surrogates: text that Python holds but UTF-8 cannot encode.

JSON may carry half of a UTF-16 pair (``"\\ud83d"``: an emoji cut in two by a
tokenizer or a server); ``json.loads`` turns it into a ``str`` that raises
``UnicodeEncodeError`` at the first byte edge it meets — espeak-ng's stdin, the
JSONL event log, the console. Model output is cleaned once where it enters
(``ReplyLoop`` for every provider, ``load_recording`` for recordings), and the
byte edges clean again, since text also arrives from elsewhere (``argv`` under
``surrogateescape``, a tool's result). Each lone surrogate becomes U+FFFD.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_UNSPEAKABLE = re.compile("[\ud800-\udfff\ufffd]")


def replace_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (itself when it has none)."""
    if text.isascii():  # the common case, and O(1) in CPython
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def unspeakable_to_space(text: str) -> str:
    """``text`` for a voice: lone surrogates and U+FFFD (text already lost) become
    spaces. espeak-ng reads U+FFFD aloud as garbage ("I umlaut a half")."""
    if text.isascii():
        return text
    return _UNSPEAKABLE.sub(" ", text)


def has_surrogates(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def replace_surrogates_in(value: Any) -> Any:
    """A JSON-like value (a tool call's input) with its strings, keys included, cleaned."""
    if isinstance(value, str):
        return replace_surrogates(value)
    if isinstance(value, dict):
        return {replace_surrogates_in(k): replace_surrogates_in(v) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_surrogates_in(v) for v in value]
    return value

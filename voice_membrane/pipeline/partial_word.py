"""The unfinished last word of a reply cut off by an error.

A reply that ends on an error stops wherever the stream broke, often inside a
word (``The firs``). That fragment must be neither spoken nor kept as heard:
speech and the conversation history end at the last complete word. A reply
that ended normally keeps its last word, with or without punctuation after it.
"""

from __future__ import annotations

import re

# A word's letters and digits (any script) and the apostrophes inside a word,
# straight or typographic (``don'`` may become ``don't``): a text ending in one
# of them may go on.
_TRAILING_WORD = re.compile(r"[\w'\u2019]+\Z")


def ends_mid_word(text: str) -> bool:
    """Could the last word of ``text`` continue, were more text to come?"""
    return _TRAILING_WORD.search(text) is not None


def without_partial_word(text: str) -> str:
    """``text`` up to the end of its last complete word: a trailing run of word
    characters is removed (whitespace and punctuation before it stay)."""
    match = _TRAILING_WORD.search(text)
    return text if match is None else text[: match.start()]

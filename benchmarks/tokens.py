"""A deterministic, approximate LLM tokenizer for feeding text the way a model streams it.

Real BPE tokenizers (tiktoken, SentencePiece) need vocabularies downloaded at run time,
which this machine cannot fetch. This regex reproduces their *shape* closely enough for
latency counting: a leading space sticks to the following word, common English
contractions are their own tokens, long words break into several pieces, digits come
in groups of up to three, punctuation runs stay together, and every CJK character is a
token. Counts are therefore "approximate BPE tokens", not any particular model's.
"""

from __future__ import annotations

import re

# Longest letter run one token holds: BPE vocabularies (cl100k, o200k) hold most
# common words of up to about nine letters as a single token.
MAX_WORD_PIECE = 9

_CJK = (
    "\u3000-\u303f"  # CJK punctuation (ideographic comma, full stop, quotes)
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff"  # CJK ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\uff00-\uffef"  # full-width forms (punctuation, digits)
)

# Order matters: CJK before letters (``\w`` matches ideographs), contractions before
# words, and the final ``.`` guarantees every character lands in some token.
_TOKEN_RE = re.compile(
    rf"[{_CJK}]"
    r"|['\u2019](?:s|t|re|ve|m|ll|d)\b"
    rf"| ?(?:(?![{_CJK}])[^\W\d_])+"
    r"| ?\d{1,3}"
    rf"| ?(?:(?![{_CJK}])[^\s\w]|_)+"
    r"|\s*\n"  # a newline run (with any trailing spaces before it) is one token
    r"|[ \t]+(?!\S)|[ \t]+"  # extra spaces; the last one stays with the next word
    r"|.",
    re.DOTALL | re.IGNORECASE,
)


def _split_long(piece: str) -> list[str]:
    """Break a word longer than ``MAX_WORD_PIECE`` letters; the first piece keeps the space."""
    lead = " " if piece.startswith(" ") else ""
    word = piece[len(lead) :]
    if len(word) <= MAX_WORD_PIECE or not word.isalpha():
        return [piece]
    parts = [word[i : i + MAX_WORD_PIECE] for i in range(0, len(word), MAX_WORD_PIECE)]
    parts[0] = lead + parts[0]
    return parts


def tokenize(text: str) -> list[str]:
    """Split ``text`` into approximate LLM tokens; ``"".join(tokenize(t)) == t`` always."""
    tokens: list[str] = []
    for match in _TOKEN_RE.finditer(text):
        tokens.extend(_split_long(match.group()))
    return tokens

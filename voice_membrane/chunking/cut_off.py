"""A stream cut off by the model's token limit: where its speech may end.

A reply stopped by ``max_tokens`` ends wherever the budget ran out, usually in
the middle of a sentence. Spoken as it is, it leaves the listener hanging. The
chunker's cut-off flush (``SpeechChunker.flush(cut_off=True)``) ends the
stream's speech instead:

- on the last sentence end among the pieces not yet released: the unfinished
  sentence after it is dropped (none of it was said);
- if the text released before already ended a sentence and nothing held ends
  one, all that is held is dropped;
- else a sentence was begun aloud (or the stream is one unfinished sentence):
  it is said up to its last complete word and ``cut_off_text`` (a short cue,
  "— I'll stop there." by default) finishes it. With no cue set, the held
  words are still said: the speech then ends mid-sentence, as the model did.

These are the pure rules; the chunker applies them to its own pieces.
"""

from __future__ import annotations

import re

from .sentences import TERMINALS

# The cue said after a sentence the token limit cut (``[chunker] cut_off_text``).
CUT_OFF_TEXT = "— I'll stop there."

CLOSERS = "\"'”’»)\\]」』）】"  # noqa: RUF001 (closing quotes and brackets)
_ENDS_SENTENCE = re.compile(rf"[{''.join(sorted(TERMINALS))}][{CLOSERS}]*\s*\Z")
# A word's letters and digits (any script), with the apostrophes inside a word: at
# the limit the next token might have gone on with it.
_TRAILING_WORD = re.compile(r"[\w'\u2019]+\Z")
# What may precede a word the cue replaces: a clause mark or a dash, and spaces.
_TRAILING_JOIN = re.compile(r"[\s,;:\-\u2013\u2014\u3001\uff0c\uff1b\uff1a]+\Z")


def ends_sentence(text: str) -> bool:
    """Whether ``text`` (a piece as it is said) ends a sentence: a terminal mark,
    closing quotes or brackets, then only whitespace. A line ending without one
    (``Here is how:``) does not."""
    return _ENDS_SENTENCE.search(text) is not None


def without_unfinished_word(text: str) -> str:
    """``text`` less the word the limit may have cut and the clause mark or
    dash before where the cue goes: ``help with a specific topic,`` → ``help
    with a specific topic``, ``you need hel`` → ``you need``."""
    match = _TRAILING_WORD.search(text)
    if match is not None:
        text = text[: match.start()]
    match = _TRAILING_JOIN.search(text)
    return text if match is None else text[: match.start()]

"""Cut visible LLM text into speakable pieces as it streams.

``SpeechChunker`` is the entry point: feed it visible text in any pieces, get
``SpeechChunk``\\ s to send to a TTS engine. ``SpeechText`` (used by the chunker,
usable on its own) makes a stream speakable without waiting for it to end:
``MarkdownFilter`` removes markdown, ``TableFilter`` says pipe tables row by row,
``SpeakableFilter`` says URLs as hosts and drops emoji, and ``PhraseFilter`` cuts the
phrases a ``PhraseGuard`` bans from what is left. All are sans-I/O and give the
same result however their input is split.
"""

from __future__ import annotations

from .chunker import ChunkKind, SpeechChunk, SpeechChunker
from .markdown import MarkdownFilter, Segment
from .phrase_filter import PhraseFilter
from .phrase_guard import PhraseGuard
from .speakable import SpeakableFilter
from .speech_text import SpeechText
from .tables import TableFilter, TableMode

__all__ = [
    "ChunkKind",
    "MarkdownFilter",
    "PhraseFilter",
    "PhraseGuard",
    "Segment",
    "SpeakableFilter",
    "SpeechChunk",
    "SpeechChunker",
    "SpeechText",
    "TableFilter",
    "TableMode",
]

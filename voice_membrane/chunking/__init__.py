"""Cut visible LLM text into speakable pieces as it streams.

``SpeechChunker`` is the entry point: feed it visible text in any pieces, get
``SpeechChunk``\\ s to send to a TTS engine. ``MarkdownFilter`` (used by the chunker,
usable on its own) removes markdown from a stream without waiting for it to end.
Both are sans-I/O and give the same result however their input is split.
"""

from __future__ import annotations

from .chunker import ChunkKind, SpeechChunk, SpeechChunker
from .markdown import MarkdownFilter, Segment

__all__ = ["ChunkKind", "MarkdownFilter", "Segment", "SpeechChunk", "SpeechChunker"]

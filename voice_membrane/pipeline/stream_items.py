"""The items on the streams between the stages of a turn. The stages are small
classes with one job each (``reply_stages.py``, ``audio_stages.py``), joined by
bounded anyio memory streams::

    ReplyStage ─Timed→ RouteStage ─Visible→ ChunkStage ─Piece→ TtsStage ─PieceAudio→ SinkStage

A stage's ``run`` reads its input stream until it closes, then closes its
output, so the end of the reply flows down the graph. Backpressure comes from
the bounded streams: a slow sink blocks TTS, which stops taking pieces; the
buffers in between let a fast LLM run ahead by their size, no more.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..chunking import SpeechChunk
from ..tts.base import Alignment
from ..vocab.audio import AudioChunk
from ..vocab.events import Event


@dataclass(frozen=True, slots=True)
class Timed:
    """A reply event, stamped with the arrival of the provider output that produced it.

    ``unfinished``: on a text block's ``BlockComplete``, the reply failed right
    after it, so its last word may be cut off and is not spoken. ``cut_off``: the
    reply ended right after it at the token limit (``max_tokens``), so its last
    sentence may be unfinished (``SpeechChunker.flush(cut_off=True)``).
    """

    event: Event
    t_ns: int
    unfinished: bool = False
    cut_off: bool = False


@dataclass(frozen=True, slots=True)
class Visible:
    """Visible text for the chunker, or (``text=None``) the end of a visible block
    (``unfinished``: cut off by an error; ``cut_off``: by the token limit; see
    ``Timed``)."""

    text: str | None
    t_ns: int
    unfinished: bool = False
    cut_off: bool = False


@dataclass(frozen=True, slots=True)
class Piece:
    """A speakable piece; ``t_token_ns`` is when the delta that released it arrived."""

    chunk: SpeechChunk
    t_token_ns: int


@dataclass(frozen=True, slots=True)
class PieceAudio:
    """Audio of the turn's piece number ``index`` (pieces come in text order);
    ``text`` is the piece as the chunker released it."""

    index: int
    text: str
    audio: AudioChunk
    alignment: Alignment | None

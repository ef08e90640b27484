"""What a speech-to-text engine says it heard: partial and final transcripts.

Times are seconds of the *input audio* (samples pushed ÷ sample rate since the
stream opened), never the wall clock: a stream fed faster than real time, from a
file in a test, gives the same transcripts and times as a live microphone.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Word:
    """One recognized word and where it lies in the input audio, when the engine
    says (``confidence`` in [0, 1], None when it does not)."""

    text: str
    start_s: float
    end_s: float
    confidence: float | None = None


@dataclass(frozen=True, slots=True)
class Transcript:
    """A transcript of the utterance being heard.

    ``final`` False: a partial — the engine's best guess so far, replaced by the
    next one (shown dimmed; never starts a turn). ``final`` True: the engine will
    not change this text any more; an utterance may end in several finals (one per
    segment the engine settles), concatenated in order. ``start_s``/``end_s``:
    the audio it covers, in stream seconds (None when the engine does not say).
    """

    text: str
    final: bool
    words: tuple[Word, ...] = field(default_factory=tuple)
    start_s: float | None = None
    end_s: float | None = None
    confidence: float | None = None

"""What the fake speech-to-text services hear: scripted words revealed as audio arrives.

A ``TranscriptScript`` is one connection's behaviour: the words of the utterance
with their times in stream seconds, how often an interim result goes out (every
``interim_ms`` of audio *received*, counted in samples, never the wall clock, so
a test that pushes a file faster than real time sees the same results), after
which words a final is settled, how long the service takes to finalize, and at
most one fault. Both fakes (``fake_deepgram``, ``fake_openai_transcribe``) read
the same script; the fakes serve a queue of them in order, and behave normally
(an empty script: nothing heard) once it is empty.

Faults: ``http_error`` refuses the WebSocket upgrade with a status (and
``retry-after``); ``drop`` cuts the TCP connection (no close frame) once
``after_messages`` messages were sent; ``stall`` stops sending anything from
then on and keeps the socket open; ``malformed`` sends one frame that is not
JSON at that point, then carries on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

TranscriptFaultKind = Literal["http_error", "drop", "stall", "malformed"]


@dataclass(frozen=True, slots=True)
class ScriptWord:
    text: str
    start_s: float
    end_s: float
    confidence: float = 0.98


@dataclass(frozen=True, slots=True)
class TranscriptFault:
    kind: TranscriptFaultKind
    after_messages: int = 0  # drop / stall / malformed: messages sent first
    status: int = 500  # http_error
    retry_after: float | None = None  # http_error: the retry-after header, seconds
    message: str = "scripted error"


@dataclass(frozen=True, slots=True)
class TranscriptScript:
    """One connection: the words heard, the pacing, the finalization time, a fault."""

    words: tuple[ScriptWord, ...] = ()
    interim_ms: int = 300  # an interim result per this much audio received
    finals_after: tuple[int, ...] = ()  # word indices after which a final is settled
    finalize_s: float = 0.0  # the service's own time to answer a Finalize / commit
    fault: TranscriptFault | None = None
    ignore_finalize: bool = field(default=False)  # never answer Finalize / commit

    @classmethod
    def of(
        cls,
        text: str,
        *,
        word_s: float = 0.4,
        gap_s: float = 0.1,
        lead_s: float = 0.2,
        **options: object,
    ) -> TranscriptScript:
        """``text``'s words spoken one after another from ``lead_s``: each
        ``word_s`` long with ``gap_s`` between them."""
        words: list[ScriptWord] = []
        at = lead_s
        for word in text.split():
            words.append(ScriptWord(word, round(at, 3), round(at + word_s, 3)))
            at += word_s + gap_s
        return cls(tuple(words), **options)  # type: ignore[arg-type]

    @classmethod
    def http_error(cls, status: int, *, retry_after: float | None = None) -> TranscriptScript:
        return cls(fault=TranscriptFault("http_error", status=status, retry_after=retry_after))

    def with_fault(self, kind: TranscriptFaultKind, after_messages: int = 0) -> TranscriptScript:
        return TranscriptScript(
            self.words,
            self.interim_ms,
            self.finals_after,
            self.finalize_s,
            TranscriptFault(kind, after_messages=after_messages),
            self.ignore_finalize,
        )

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.words)

    def heard(self, audio_s: float) -> int:
        """How many words have ended within ``audio_s`` seconds of audio."""
        return sum(1 for w in self.words if w.end_s <= audio_s + 1e-9)

    def settled(self, heard: int) -> int:
        """How many of the ``heard`` words a final has settled (``finals_after``)."""
        done = [i + 1 for i in self.finals_after if i + 1 <= heard]
        return max(done, default=0)

    def fault_at(self, sent: int) -> TranscriptFault | None:
        """The mid-stream fault due once ``sent`` messages are out."""
        fault = self.fault
        if fault is None or fault.kind == "http_error" or fault.after_messages != sent:
            return None
        return fault

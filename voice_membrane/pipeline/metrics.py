"""What a running turn measures: when each stage first did something, and how
busy it was (``TurnMetrics``, filled in by the stages); ``TurnMetrics.report``
makes the turn's ``LatencyReport`` of it (``latency_report.py``: the stamps'
definitions, the report's dict form and table; re-exported here).

Every stamp is ``time.perf_counter_ns()`` taken by the stage itself (the sink, for
``first_audio``) at the moment it happens.
"""

from __future__ import annotations

import bisect
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Final

from ..tts.base import StreamStats
from .latency_report import (
    STAMPS,
    TYPED,
    ContextFit,
    LatencyReport,
    TurnEnd,
)

__all__ = [  # (the report's names, where their users import them from)
    "STAGES",
    "STAMPS",
    "ContextFit",
    "LatencyReport",
    "PieceMetrics",
    "StageTimer",
    "TurnEnd",
    "TurnMetrics",
]

STAGES: Final = ("llm", "parse", "route", "chunk", "tts", "sink")
# Audio arriving this late after the audio before it ran out is not a gap: a
# sink's buffer (a speaker's callback block, ~10 ms) covers it.
GAP_TOLERANCE_NS: Final = 5_000_000


@dataclass(slots=True)
class StageTimer:
    """Busy time of one stage: the time it spent working, not waiting for input."""

    busy_ns: int = 0
    items: int = 0

    def add(self, started_ns: int) -> None:
        self.busy_ns += time.perf_counter_ns() - started_ns
        self.items += 1


@dataclass(slots=True)
class PieceMetrics:
    """One piece's way through the TTS engine."""

    chars: int  # of the text sent
    sent_ns: int | None = None  # when its text was handed to the engine
    first_audio_ns: int | None = None  # when the engine returned its first audio
    audio_seconds: float = 0.0

    @property
    def first_byte_ms(self) -> float | None:
        """TTS time to first byte of this piece, from when its text was sent."""
        if self.sent_ns is None or self.first_audio_ns is None:
            return None
        return max(0.0, (self.first_audio_ns - self.sent_ns) / 1e6)

    def to_dict(self) -> dict[str, Any]:
        first_byte = self.first_byte_ms
        return {
            "chars": self.chars,
            "first_byte_ms": None if first_byte is None else round(first_byte, 3),
            "audio_seconds": round(self.audio_seconds, 3),
        }


@dataclass(slots=True)
class TurnMetrics:
    """Mutable stamps and counters a running turn fills in."""

    started_ns: int = field(default_factory=time.perf_counter_ns)
    stamps: dict[str, int] = field(default_factory=dict)
    stages: dict[str, StageTimer] = field(
        default_factory=lambda: {name: StageTimer() for name in STAGES}
    )
    tokens: int = 0
    visible_chars: int = 0
    chunks: int = 0
    chars_spoken: int = 0
    audio_seconds: float = 0.0  # audio the TTS engine produced
    resampled_seconds: float = 0.0  # of it, resampled to the sink's rate
    pieces: list[PieceMetrics] = field(default_factory=list)  # as sent to the TTS engine
    tts_stats: StreamStats = field(default_factory=StreamStats)  # the engine's, for the turn
    first_chunk_token_ns: int | None = None  # arrival of the delta that released piece 1
    token_ns: list[int] = field(default_factory=list)  # each LLM delta's arrival
    # Where real-time playback of the engine's audio, started at its first audio,
    # would have run dry waiting for the next (``note_audio``).
    gaps: int = 0
    gap_ns: int = 0
    _playable_until_ns: int | None = None
    # Silences spent waiting on a tool round: not the TTS falling behind (``note_tool_round``).
    tool_pauses: int = 0
    tool_pause_ns: int = 0
    _tool_round: tuple[int, int | None] | None = None  # the latest: its start, its end
    llm_held_ns: int | None = None  # first-audio priority's hold on the LLM (None: off)
    retries: list[str] = field(default_factory=list)  # each failed attempt and the wait after it
    usage: dict[str, int] = field(default_factory=dict)  # the provider's token counts, if any
    stop_reason: str | None = None  # why the reply ended, as the membrane says
    llm_error: str | None = None  # the kind of LLM error that ended it ("stalled", …)
    tts_retries: list[str] = field(default_factory=list)  # kinds of the TTS requests retried
    tts_error: str | None = None  # the kind of TTS error that ended the speech
    context: ContextFit | None = None  # how the request fits the context, when it is checked
    interrupted: bool = False
    # Why the user's turn ended: a turn is typed unless the voice loop says
    # otherwise (``voice_loop.converse``, as the turn starts or is decided).
    end: TurnEnd = TYPED

    def stamp(self, name: str, at_ns: int | None = None) -> None:
        """Record ``name`` the first time it happens; later calls are ignored."""
        if name not in self.stamps:
            self.stamps[name] = time.perf_counter_ns() if at_ns is None else at_ns

    def note_audio(self, at_ns: int, seconds: float) -> None:
        """The engine returned ``seconds`` of audio at ``at_ns``: played in real time
        from the first audio on, was the audio before it already over (a gap)?"""
        until = self._playable_until_ns
        if until is not None and at_ns > until + GAP_TOLERANCE_NS:
            if self._waited_on_tool(until, at_ns):
                self.tool_pauses += 1
                self.tool_pause_ns += at_ns - until
            else:
                self.gaps += 1
                self.gap_ns += at_ns - until
        start = at_ns if until is None else max(until, at_ns)
        self._playable_until_ns = start + round(seconds * 1e9)

    def note_tool_round(self, at_ns: int) -> None:
        """A tool call began: the reply waits on its round (call, result, the
        model's continuation) until ``note_reply_goes_on``."""
        if self._tool_round is None or self._tool_round[1] is not None:
            self._tool_round = (at_ns, None)

    def note_reply_goes_on(self, at_ns: int) -> None:
        """Visible text again after a tool round: the round is over."""
        if self._tool_round is not None and self._tool_round[1] is None:
            self._tool_round = (self._tool_round[0], at_ns)

    def _waited_on_tool(self, silent_from: int, silent_to: int) -> bool:
        """Whether a tool round overlapped this silence."""
        if self._tool_round is None:
            return False
        start, end = self._tool_round
        return start < silent_to and (end is None or end > silent_from)

    @property
    def tokens_to_first_chunk(self) -> int | None:
        """The LLM deltas up to the one that released the first piece."""
        if self.first_chunk_token_ns is None:
            return None
        return bisect.bisect_right(self.token_ns, self.first_chunk_token_ns)

    def report(self, *, llm: str, tts: str, sink: str) -> LatencyReport:
        def ms(ns: int | None) -> float | None:
            return None if ns is None else round((ns - self.started_ns) / 1e6, 3)

        stamps = {name: ms(self.stamps.get(name)) for name in STAMPS}
        stamps["request_sent"] = 0.0
        rtf = None
        if self.audio_seconds > 0 and self.tts_stats.busy_ns > 0:
            rtf = round(self.tts_stats.busy_ns / 1e9 / self.audio_seconds, 4)
        ttfb = [b for b in (p.first_byte_ms for p in self.pieces) if b is not None]
        stats = self.tts_stats
        return LatencyReport(
            llm=llm,
            tts=tts,
            sink=sink,
            interrupted=self.interrupted,
            stamps_ms=stamps,
            end=self.end,
            stages={
                name: {"busy_ms": round(t.busy_ns / 1e6, 3), "items": t.items}
                for name, t in self.stages.items()
            },
            tokens=self.tokens,
            visible_chars=self.visible_chars,
            chunks=self.chunks,
            chars_spoken=self.chars_spoken,
            audio_seconds=round(self.audio_seconds, 3),
            audio_resampled_seconds=round(self.resampled_seconds, 3),
            tts_rtf=rtf,
            tts_first_byte_ms_median=round(statistics.median(ttfb), 3) if ttfb else None,
            first_chunk_token_ms=ms(self.first_chunk_token_ns),
            tokens_to_first_chunk=self.tokens_to_first_chunk,
            audio_gaps=self.gaps,
            audio_gap_ms=round(self.gap_ns / 1e6, 3),
            tool_pauses=self.tool_pauses,
            tool_pause_ms=round(self.tool_pause_ns / 1e6, 3),
            llm_held_ms=None if self.llm_held_ns is None else round(self.llm_held_ns / 1e6, 3),
            retries=tuple(self.retries),
            usage=dict(self.usage),
            stop_reason=self.stop_reason,
            llm_error=self.llm_error,
            context=self.context,
            tts_pieces=tuple(p.to_dict() for p in self.pieces),
            tts_connection={
                "reused": stats.reused_connection,
                "reconnects": stats.reconnects,
                "cancelled_requests": stats.cancelled_requests,
                "chars_billed": stats.chars_billed,
                "retries": list(self.tts_retries),
                "error": self.tts_error,
            },
        )

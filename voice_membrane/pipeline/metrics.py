"""Latency metrics of a turn: when each stage first did something, and how busy it was.

Every stamp is ``time.perf_counter_ns()`` taken by the stage itself (the sink, for
``first_audio``) at the moment it happens; the report gives them in milliseconds
since the request was sent.
Definitions (docs/metrics.md has the full glossary):

- ``request_sent`` — the LLM request left (0 by definition).
- ``first_token`` — the first text delta arrived from the LLM.
- ``first_visible`` — the parser emitted the first visible (speakable) character.
- ``first_chunk`` — the chunker released the first speakable piece.
- ``tts_request`` — the first piece's text was handed to the TTS engine.
- ``tts_first_byte`` — the engine returned the first audio of that piece.
- ``first_audio`` — the sink's playback took the first sample (a speaker: its
  device callback; see ``AudioSink.first_played_ns``).
- ``last_audio`` — the sink finished playing (drained) the turn's audio.
- ``turn_end`` — every stage of the turn has finished.
"""

from __future__ import annotations

import bisect
import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Final

from ..tts.base import StreamStats

STAMPS: Final = (
    "request_sent",
    "first_token",
    "first_visible",
    "first_chunk",
    "tts_request",
    "tts_first_byte",
    "first_audio",
    "last_audio",
    "turn_end",
)
STAGES: Final = ("llm", "parse", "route", "chunk", "tts", "sink")
# Audio arriving this late after the audio before it ran out is not a gap: a
# sink's buffer (a speaker's callback block, ~10 ms) covers it.
GAP_TOLERANCE_NS: Final = 5_000_000


@dataclass(frozen=True, slots=True)
class ContextFit:
    """How the turn's request was kept within the model's context (``history.py``)."""

    dropped: int  # oldest turns of the conversation left out of the request, in all
    kept: int  # earlier turns sent with it
    tokens: int  # the request's size as counted
    budget: int  # the most it may hold
    exact: bool  # counted with the model's own tokenizer (else estimated)

    def to_dict(self) -> dict[str, Any]:
        return {
            "turns_dropped": self.dropped,
            "turns_kept": self.kept,
            "tokens": self.tokens,
            "budget": self.budget,
            "exact": self.exact,
        }


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


@dataclass(frozen=True, slots=True)
class LatencyReport:
    """The measured latencies and counts of one turn (see docs/metrics.md).

    ``stamps_ms`` maps every name of ``STAMPS`` to milliseconds since the request
    was sent, or None where that stage never ran (a turn interrupted before any
    audio, a reply with no visible text). Reports of interrupted turns carry
    ``interrupted=True`` and must not be averaged with complete ones.
    """

    llm: str
    tts: str
    sink: str
    interrupted: bool
    stamps_ms: dict[str, float | None]
    stages: dict[str, dict[str, float]]
    tokens: int
    visible_chars: int
    chunks: int
    chars_spoken: int
    audio_seconds: float
    tts_rtf: float | None
    tts_first_byte_ms_median: float | None
    first_chunk_token_ms: float | None
    tokens_to_first_chunk: int | None = None  # LLM deltas up to the one that released piece 1
    # Real-time playback of the engine's audio from its first audio on would have
    # run dry this often, for this long in all: the TTS fell behind the listener.
    audio_gaps: int = 0
    audio_gap_ms: float = 0.0
    # Silences while the reply waited on a tool round (not counted as gaps).
    tool_pauses: int = 0
    tool_pause_ms: float = 0.0
    # The engine's audio resampled to the sink's rate (0: it spoke the sink's own
    # format, e.g. ElevenLabs' ulaw_8000 on a phone call).
    audio_resampled_seconds: float = 0.0
    llm_held_ms: float | None = None  # first-audio priority held the LLM (None: off)
    retries: tuple[str, ...] = ()  # LLM calls that failed before any output and were retried
    usage: dict[str, int] = field(default_factory=dict)  # provider-reported tokens (cloud)
    stop_reason: str | None = None
    # The kind of LLM error that ended the reply ("stalled", "timeout", "connection",
    # … — vendors/errors.py), None when none did.
    llm_error: str | None = None
    context: ContextFit | None = None  # None: the request's size was not checked
    # Per piece sent to the TTS engine: chars, first_byte_ms (from when that piece
    # was sent), audio_seconds.
    tts_pieces: tuple[dict[str, Any], ...] = ()
    # The engine's connection over the turn: reused (a connection an earlier turn
    # opened), reconnects, cancelled_requests, chars_billed, retries (the kinds of the
    # requests retried), error (the kind of the error that ended the speech, or None).
    tts_connection: dict[str, Any] = field(default_factory=dict)

    @property
    def first_audio_ms(self) -> float | None:
        return self.stamps_ms["first_audio"]

    @property
    def cut_off(self) -> bool:
        """The reply was cut by the model's token limit (``llm.max_tokens``)."""
        return self.stop_reason == "max_tokens"

    @property
    def pipeline_added_ms(self) -> float | None:
        """First audio minus what the engines account for: the LLM's time to the
        token that completed the first piece, plus the TTS engine's time to the
        first audio of that piece. The rest is this pipeline's own overhead."""
        first_audio, token = self.stamps_ms["first_audio"], self.first_chunk_token_ms
        request, first_byte = self.stamps_ms["tts_request"], self.stamps_ms["tts_first_byte"]
        if first_audio is None or token is None or request is None or first_byte is None:
            return None
        return round(first_audio - token - (first_byte - request), 3)

    def to_dict(self) -> dict[str, Any]:
        return {
            "llm": self.llm,
            "tts": self.tts,
            "sink": self.sink,
            "interrupted": self.interrupted,
            "stamps_ms": dict(self.stamps_ms),
            "stages": {k: dict(v) for k, v in self.stages.items()},
            "counts": {
                "tokens": self.tokens,
                "visible_chars": self.visible_chars,
                "chunks": self.chunks,
                "chars_spoken": self.chars_spoken,
                "audio_seconds": self.audio_seconds,
                "audio_resampled_seconds": self.audio_resampled_seconds,
            },
            "tts_rtf": self.tts_rtf,
            "tts_first_byte_ms_median": self.tts_first_byte_ms_median,
            "first_chunk_token_ms": self.first_chunk_token_ms,
            "tokens_to_first_chunk": self.tokens_to_first_chunk,
            "pipeline_added_ms": self.pipeline_added_ms,
            "audio_gaps": self.audio_gaps,
            "audio_gap_ms": self.audio_gap_ms,
            "tool_pauses": self.tool_pauses,
            "tool_pause_ms": self.tool_pause_ms,
            "llm_held_ms": self.llm_held_ms,
            "retries": list(self.retries),
            "usage": dict(self.usage),
            "stop_reason": self.stop_reason,
            "llm_error": self.llm_error,
            "context": None if self.context is None else self.context.to_dict(),
            "tts_stream": {"pieces": [dict(p) for p in self.tts_pieces], **self.tts_connection},
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LatencyReport:
        """The report ``to_dict`` gave (e.g. a ``serve`` client's ``metrics`` event);
        ``KeyError`` / ``TypeError`` / ``ValueError`` when it is not one."""
        counts, context, stream = data["counts"], data.get("context"), dict(data["tts_stream"])
        pieces = stream.pop("pieces", [])
        return cls(
            llm=str(data["llm"]),
            tts=str(data["tts"]),
            sink=str(data["sink"]),
            interrupted=bool(data["interrupted"]),
            stamps_ms={name: data["stamps_ms"].get(name) for name in STAMPS},
            stages={k: dict(v) for k, v in data["stages"].items()},
            tokens=int(counts["tokens"]),
            visible_chars=int(counts["visible_chars"]),
            chunks=int(counts["chunks"]),
            chars_spoken=int(counts["chars_spoken"]),
            audio_seconds=float(counts["audio_seconds"]),
            audio_resampled_seconds=float(counts.get("audio_resampled_seconds", 0.0)),
            tts_rtf=data["tts_rtf"],
            tts_first_byte_ms_median=data["tts_first_byte_ms_median"],
            first_chunk_token_ms=data["first_chunk_token_ms"],
            tokens_to_first_chunk=data.get("tokens_to_first_chunk"),
            audio_gaps=int(data.get("audio_gaps", 0)),
            audio_gap_ms=float(data.get("audio_gap_ms", 0.0)),
            tool_pauses=int(data.get("tool_pauses", 0)),
            tool_pause_ms=float(data.get("tool_pause_ms", 0.0)),
            llm_held_ms=data.get("llm_held_ms"),
            retries=tuple(data.get("retries", ())),
            usage=dict(data.get("usage", {})),
            stop_reason=data.get("stop_reason"),
            llm_error=data.get("llm_error"),
            context=None
            if context is None
            else ContextFit(
                dropped=context["turns_dropped"],
                kept=context["turns_kept"],
                tokens=context["tokens"],
                budget=context["budget"],
                exact=context["exact"],
            ),
            tts_pieces=tuple(dict(p) for p in pieces),
            tts_connection=stream,
        )

    def table(self) -> str:
        """A human-readable table for the terminal."""
        lines = [
            f"latency ({self.llm} → {self.tts} → {self.sink})"
            + ("  [interrupted]" if self.interrupted else "")
            + ("  [cut off (max_tokens)]" if self.cut_off else "")
        ]
        for name in STAMPS[1:]:
            value = self.stamps_ms[name]
            shown = "—" if value is None else f"{value:8.1f} ms"
            lines.append(f"  {name.replace('_', ' '):<16}{shown:>12}")
        added = self.pipeline_added_ms
        if added is not None:
            lines.append(f"  {'pipeline added':<16}{added:>9.1f} ms")
        for retry in self.retries:  # they explain a late first token
            lines.append(f"  retried: {retry}")
        if self.stop_reason or self.usage:
            said = [f"stop {self.stop_reason}"] if self.stop_reason else []
            if said and self.llm_error:
                said[0] += f" ({self.llm_error})"
            said += [f"{name.replace('_', ' ')} {n}" for name, n in self.usage.items()]
            lines.append(f"  reply: {', '.join(said)}")
        fit = self.context
        if fit is not None and (fit.dropped or fit.tokens > fit.budget):
            counted = "tokens" if fit.exact else "tokens, estimated"
            over = ", over budget" if fit.tokens > fit.budget else ""
            lines.append(
                f"  history: oldest {fit.dropped} turn{'s' if fit.dropped != 1 else ''} "
                f"dropped, {fit.kept} kept ({fit.tokens} of {fit.budget} {counted}{over})"
            )
        tts_line = self._tts_line()
        if tts_line:
            lines.append(tts_line)
        if self.audio_gaps:
            lines.append(
                f"  gaps: the TTS fell behind playback {self.audio_gaps} time(s), "
                f"{self.audio_gap_ms:.0f} ms in all"
            )
        if self.tool_pauses:
            lines.append(
                f"  tool pauses: {self.tool_pauses}, {self.tool_pause_ms:.0f} ms in all "
                "(waiting on tool calls, not the TTS)"
            )
        if self.llm_held_ms:
            lines.append(f"  first-audio priority: LLM held {self.llm_held_ms:.0f} ms")
        busy = ", ".join(f"{k} {v['busy_ms']:.0f}" for k, v in self.stages.items())
        lines.append(f"  busy ms: {busy}")
        rtf = "—" if self.tts_rtf is None else f"{self.tts_rtf:.2f}"
        lines.append(
            f"  tokens {self.tokens}, pieces {self.chunks}, chars spoken {self.chars_spoken}, "
            f"audio {self.audio_seconds:.1f} s, TTS real-time factor {rtf}"
        )
        return "\n".join(lines)

    def _tts_line(self) -> str | None:
        """What the TTS service cost, when there is something to say beyond the
        stamps: more than one piece, a billed service, a reused or re-opened
        connection, requests cut off."""
        first_bytes = [
            p["first_byte_ms"] for p in self.tts_pieces if p["first_byte_ms"] is not None
        ]
        conn = self.tts_connection
        said: list[str] = []
        if len(first_bytes) > 1:
            said.append(
                f"first byte per piece p50 {statistics.median(first_bytes):.0f} ms "
                f"(max {max(first_bytes):.0f}) over {len(first_bytes)} pieces"
            )
        if conn.get("chars_billed"):
            said.append(f"{conn['chars_billed']} chars billed")
        if conn.get("reused"):
            said.append("connection reused")
        if conn.get("reconnects"):
            said.append(f"{conn['reconnects']} reconnect(s)")
        if conn.get("cancelled_requests"):
            said.append(f"{conn['cancelled_requests']} request(s) cut off")
        return f"  tts: {', '.join(said)}" if said else None

"""A turn's latency report: what ``TurnMetrics`` (``metrics.py``) measured, as
a record, its dict form (the ``metrics`` event, ``--metrics-json``, the debug
folder) and its table for the terminal; and why the user's turn ended
(``TurnEnd``).

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

import json
import statistics
from dataclasses import dataclass, field
from typing import Any, Final

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


# Why a user's turn ended, as reports say it: the end-of-turn model judged the
# user done, the end silence ran out, a wait for the transcript ran out
# (``final_timeout``, ``max_delay``), a final came after its utterance had
# closed, the turn was typed (text input), or there was no user's turn: the
# assistant spoke first (the conversation's greeting).
ENDPOINT_REASONS: Final = ("model", "silence", "max_wait", "late", "typed", "greeting")


def endpoint_reason(reason: str) -> str:
    """A ``UserTurn.reason`` as reports say it: both waits are ``max_wait``."""
    return "max_wait" if reason in ("final_timeout", "max_delay") else reason


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """Why the user's turn ended (``reason``: one of ``ENDPOINT_REASONS``);
    ``barge_in``: the user's speech interrupted the assistant's reply (the
    turn is what they said over it); ``turn_model_ms``: the end-of-turn
    model's own time for its last judgement (None: no model, or not asked)."""

    reason: str
    barge_in: bool = False
    turn_model_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        model_ms = self.turn_model_ms
        return {
            "endpoint_reason": self.reason,
            "barge_in": self.barge_in,
            "turn_model_ms": None if model_ms is None else round(model_ms, 3),
        }

    def line(self) -> str:
        """``silence``, ``model (12 ms)``, ``silence (model 12 ms)`` (judged not
        done), ``…, over the answer``: for the terminal."""
        said = self.reason
        if self.turn_model_ms is not None:
            model = "" if self.reason == "model" else "model "
            said += f" ({model}{self.turn_model_ms:.0f} ms)"
        return said + (", over the answer" if self.barge_in else "")


TYPED: Final = TurnEnd("typed")  # a turn from text: nothing was listened for
GREETING: Final = TurnEnd("greeting")  # the assistant's first words: no user's turn
_NO_END: Final = {"endpoint_reason": None, "barge_in": False, "turn_model_ms": None}


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
    end: TurnEnd | None = None  # why the user's turn ended (None: a report that does not say)

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
            **(_NO_END if self.end is None else self.end.to_dict()),
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
            end=None
            if data.get("endpoint_reason") is None
            else TurnEnd(
                str(data["endpoint_reason"]),
                bool(data.get("barge_in", False)),
                data.get("turn_model_ms"),
            ),
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

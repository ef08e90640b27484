"""The figures of a voice-over-the-endpoint level (``voice_serve``), per turn and
summarized: what the client measured, what the server stamped, and what our
code added over the engines' own times; the records they are read from
(``EnginesOwn``, ``CallLevel``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .stats import nearest_rank

if TYPE_CHECKING:
    from .voice_caller import VoiceTurnRecord


@dataclass(frozen=True, slots=True)
class EnginesOwn:
    """The engines' own times, ms: the endpointing wait and the reply's first audio."""

    endpointing_ms: float
    final_ms: float  # when the STT's final can come at best (within the wait)
    reply_ms: float  # LLM TTFT + deltas to the first piece + TTS TTFB
    first_piece: str
    deltas: int
    llm_ttft_ms: float
    tts_ttfb_ms: float

    @property
    def total_ms(self) -> float:
        return self.endpointing_ms + self.reply_ms

    @property
    def deltas_ms(self) -> float:
        """From the LLM's first token to the delta that completes the first piece."""
        return self.reply_ms - self.llm_ttft_ms - self.tts_ttfb_ms


@dataclass
class CallLevel:
    callers: int
    turns: list[VoiceTurnRecord]
    errors: list[str]  # outside turns
    clients: int
    client_lag_ms: list[float]
    send_late_ms: list[float]  # the client processes' p99 of frame-send lateness
    client_cpu_cores: float
    fakes_cpu_cores: float
    server_cpu_s: float
    server_rss_base_mb: float
    server_rss_peak_mb: float
    seconds: float  # the calls' wall time
    barge: bool = False  # each answer interrupted by the caller
    route: str = "session"
    workers: int = 1  # serve's worker processes (CPU and memory count them all)
    unmatched: int = 0  # phone turns whose server figures the log could not give

    @property
    def server_cpu_cores(self) -> float:
        return self.server_cpu_s / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms_per_call_s(self) -> float:
        """Server CPU per second of call (ms of CPU per caller-second)."""
        return self.server_cpu_s * 1000 / (self.callers * self.seconds) if self.seconds else 0.0

    def error_count(self) -> int:
        return len(self.errors) + sum(len(t.errors) for t in self.turns)

    def answered(self) -> list[VoiceTurnRecord]:
        return [t for t in self.turns if t.voice_to_voice_ms is not None and not t.errors]


Figure = Callable[["VoiceTurnRecord", EnginesOwn], "float | None"]


def _server(name: str) -> Callable[[VoiceTurnRecord], float | None]:
    return lambda t: t.server.get(name)


def _minus(a: float | None, b: float | None, floor: float = 0.0) -> float | None:
    return None if a is None or b is None else a - b - floor


# name → (what it is, the figure of one answered turn)
FIGURES: dict[str, tuple[str, Figure]] = {
    "voice_to_voice": (
        "client: first audio - the voiced end captured",
        lambda t, e: t.voice_to_voice_ms,
    ),
    "added": (
        "client voice to voice - engines' own",
        lambda t, e: _minus(t.voice_to_voice_ms, e.total_ms),
    ),
    "detector_dating": (
        "the detector's speech end after the voiced end (audio ms)",
        lambda t, e: _minus(t.detector_end_ms, t.speech_end_position_ms),
    ),
    "server_endpointing": (
        "server: endpointing - the wait",
        lambda t, e: _minus(_server("endpointing_ms")(t), e.endpointing_ms),
    ),
    "server_final": (
        "server: the STT's final after the speech end",
        lambda t, e: _server("transcript_final_ms")(t),
    ),
    "server_request": (
        "server: the turn decided → the LLM request",
        lambda t, e: _minus(_server("request_ms")(t), _server("endpointing_ms")(t)),
    ),
    "server_first_audio": (
        "server: request → first audio - the reply's own",
        lambda t, e: _minus(_server("voice_to_voice_ms")(t), _server("request_ms")(t), e.reply_ms),
    ),
    "llm_first_token": (
        "server: the LLM's first token after the request - its TTFT",
        lambda t, e: _minus(_server("first_token")(t), 0.0, e.llm_ttft_ms),
    ),
    "first_piece": (
        "server: the first piece to the TTS after the LLM's first token - its deltas",
        lambda t, e: _minus(_server("tts_request")(t), _server("first_token")(t), e.deltas_ms),
    ),
    "tts_first_byte": (
        "server: the TTS's first audio after the first piece went to it - its TTFB",
        lambda t, e: _minus(_server("tts_first_byte")(t), _server("tts_request")(t), e.tts_ttfb_ms),
    ),
    "to_the_sink": (
        "server: the TTS's first audio → the sink's first audio",
        lambda t, e: _minus(_server("first_audio")(t), _server("tts_first_byte")(t)),
    ),
    "server_added": (
        "server: voice to voice - engines' own",
        lambda t, e: _minus(_server("voice_to_voice_ms")(t), e.total_ms),
    ),
    "barge_in": (
        "client: the interruption's onset sent → barge_in came",
        lambda t, e: t.barge_in_ms,
    ),
    "client_minus_server": (
        "client voice to voice - the server's",
        lambda t, e: _minus(t.voice_to_voice_ms, _server("voice_to_voice_ms")(t)),
    ),
}


def spread(values: list[float]) -> dict[str, float] | None:
    """p50 / p95 / max, rounded to 0.1 ms (None for none)."""
    if not values:
        return None
    return {
        q: round(nearest_rank(values, f), 1) for q, f in (("p50", 0.5), ("p95", 0.95), ("max", 1.0))
    }


def figure(level: CallLevel, engines: EnginesOwn, name: str) -> list[float]:
    """``name``'s value for each turn that has it (a turn that failed later, say
    waiting for the answer to its interruption, keeps what it measured; its
    error is counted apart)."""
    of = FIGURES[name][1]
    values = (of(t, engines) for t in level.turns)
    return [v for v in values if v is not None]


def error_kinds(level: CallLevel) -> Counter[str]:
    return Counter(level.errors + [e for t in level.turns for e in t.errors])


def level_summary(level: CallLevel, engines: EnginesOwn) -> dict[str, Any]:
    lag = level.client_lag_ms
    return {
        "callers": level.callers,
        "route": level.route,
        "workers": level.workers,
        "turns": len(level.turns),
        "answered": len(level.answered()),
        "errors": dict(error_kinds(level)),
        "figures_ms": {name: spread(figure(level, engines, name)) for name in FIGURES},
        "server_cpu_cores": round(level.server_cpu_cores, 3),
        "server_cpu_ms_per_call_s": round(level.cpu_ms_per_call_s, 2),
        "server_rss_per_caller_kib": round(
            max(0.0, level.server_rss_peak_mb - level.server_rss_base_mb) * 1024 / level.callers
        ),
        "client_lag_p99_ms": round(nearest_rank(lag, 0.99), 1) if lag else None,
        "send_late_p99_ms": round(max(level.send_late_ms), 1) if level.send_late_ms else None,
        "client_cpu_cores": round(level.client_cpu_cores, 3),
        "fakes_cpu_cores": round(level.fakes_cpu_cores, 3),
        "seconds": round(level.seconds, 1),
    }

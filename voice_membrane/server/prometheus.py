"""The server's Prometheus metrics, in a registry of its own (several servers
may run in one process, in tests). In a worker of ``serve --workers N`` the
values live in the group's multiprocess directory and a scrape reads them all
(``group_metrics.py``)."""

from __future__ import annotations

import typing
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from ..pipeline.latency_report import ENDPOINT_REASONS, LatencyReport
from ..vendors.errors import ErrorKind
from .group_metrics import group_registry, multiproc_dir

# First audio of a turn, from the request: the embedded model takes ~0.3 to 1 s, a
# cloud model more; the buckets cover both with room for a loaded machine.
FIRST_AUDIO_BUCKETS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
# An engine's own wait (first token, TTS first byte) starts lower: tens of ms.
STAGE_BUCKETS = (0.025, 0.05, 0.1, *FIRST_AUDIO_BUCKETS)
ERROR_KINDS = frozenset(typing.get_args(ErrorKind))
TTS_ERROR_KINDS = ERROR_KINDS | {"engine"}
# Why a login was refused: a token that does not match; none offered (or a first
# message that is no session.start or session.resume); a request through a proxy
# to a server with no token (trust.py); a phone call whose signature fails.
RefusedLogin = typing.Literal["wrong_token", "no_token", "proxied", "twilio_signature"]
# A carrier's own check, counted from 0 once that carrier is configured (server.py).
CarrierRefusal = typing.Literal["telnyx_signature", "plivo_signature"]


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.group_dir: Path | None = multiproc_dir()
        r = self.registry
        if self.group_dir is None:
            # One process: its own CPU and memory (a group's are in group_metrics).
            ProcessCollector(registry=r)
        # Gauges of a group: the sum over the workers alive now.
        self.sessions = Gauge(
            "voice_membrane_sessions", "Sessions open now", registry=r, multiprocess_mode="livesum"
        )
        self.active_turns = Gauge(
            "voice_membrane_active_turns",
            "Turns running now (a reply being made or spoken)",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.turns = Counter("voice_membrane_turns", "Turns run", registry=r)
        self.turn_ends = Counter(
            "voice_membrane_turn_ends",
            "Turns answered, by why the user's turn ended (endpoint_reason)",
            ["reason"],
            registry=r,
        )
        for reason in ENDPOINT_REASONS:  # each at 0 from the start
            self.turn_ends.labels(reason)
        self.barge_ins = Counter(
            "voice_membrane_barge_in_turns",
            "Turns whose user speech interrupted the assistant's reply",
            registry=r,
        )
        self.first_audio = Histogram(
            "voice_membrane_first_audio_seconds",
            "Time from a turn's request to its first audio",
            buckets=FIRST_AUDIO_BUCKETS,
            registry=r,
        )
        self.voice_to_voice = Histogram(
            "voice_membrane_voice_to_voice_seconds",
            "Time from the end of the user's speech to the reply's first audio",
            buckets=FIRST_AUDIO_BUCKETS,
            registry=r,
        )
        self.first_token = Histogram(
            "voice_membrane_llm_first_token_seconds",
            "Time from a turn's request to the LLM's first content delta",
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.tts_first_byte = Histogram(
            "voice_membrane_tts_first_byte_seconds",
            "Time from a turn's first piece of text handed to the TTS engine to its first audio",
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.audio_seconds = Counter(
            "voice_membrane_audio_streamed_seconds",
            "Seconds of reply audio sent to clients",
            registry=r,
        )
        by_vendor = ["vendor", "kind"]
        self.llm_errors = Counter(
            "voice_membrane_llm_errors", "LLM errors that ended a reply", by_vendor, registry=r
        )
        self.llm_retries = Counter(
            "voice_membrane_llm_retries",
            "LLM calls that failed before any output and were retried",
            by_vendor,
            registry=r,
        )
        self.tts_errors = Counter(
            "voice_membrane_tts_errors",
            "TTS errors that ended a turn's speech",
            by_vendor,
            registry=r,
        )
        self.tts_retries = Counter(
            "voice_membrane_tts_retries",
            "TTS requests that failed before any audio and were retried",
            by_vendor,
            registry=r,
        )
        self.errors = Counter(
            "voice_membrane_errors", "Error events sent, by code", ["kind"], registry=r
        )
        self.refused_logins = Counter(
            "voice_membrane_refused_logins",
            "Sessions and calls refused for their credentials, by reason",
            ["reason"],
            registry=r,
        )
        for reason in typing.get_args(RefusedLogin):  # each at 0 from the start
            self.refused_logins.labels(reason)
        self.dropped = Counter(
            "voice_membrane_dropped_clients", "Clients dropped for not keeping up", registry=r
        )
        # WebRTC's own steps (its sessions are counted with the others above).
        self.webrtc_offers = Counter(
            "voice_membrane_webrtc_offers",
            "WebRTC offers, by outcome: answered, refused (a bad offer), ice_timeout",
            ["outcome"],
            registry=r,
        )

    def observe_turn(self, report: LatencyReport, *, llm_failed: bool, tts_failed: bool) -> None:
        """A finished turn's stage latencies, retries and errors, and why it began."""
        stamps = report.stamps_ms
        if report.end is not None and report.end.reason in ENDPOINT_REASONS:
            self.turn_ends.labels(report.end.reason).inc()
            if report.end.barge_in:
                self.barge_ins.inc()
        if (first_audio := report.first_audio_ms) is not None:
            self.first_audio.observe(first_audio / 1000)
        if (first_token := stamps.get("first_token")) is not None:
            self.first_token.observe(first_token / 1000)
        request, first_byte = stamps.get("tts_request"), stamps.get("tts_first_byte")
        if request is not None and first_byte is not None:
            self.tts_first_byte.observe(max(0.0, first_byte - request) / 1000)
        llm_vendor = vendor(report.llm)
        for retry in report.retries:
            self.llm_retries.labels(*retry_labels(retry, llm_vendor)).inc()
        if llm_failed:
            self.llm_errors.labels(llm_vendor, report.llm_error or "other").inc()
        stream = report.tts_connection
        for kind in stream.get("retries", ()):
            self.tts_retries.labels(vendor(report.tts), _label(kind)).inc()
        if tts_failed:
            self.tts_errors.labels(vendor(report.tts), _label(stream.get("error"))).inc()

    def render(self) -> bytes:
        if self.group_dir is not None:
            return generate_latest(group_registry(self.group_dir))
        return generate_latest(self.registry)


def vendor(engine: str) -> str:
    """``elevenlabs`` of ``elevenlabs:VOICE_ID``: a voice id is no label value."""
    return engine.partition(":")[0]


def _label(kind: object) -> str:
    """A TTS error's kind (``TtsError.kind``) as a label value; ``other`` if unsorted."""
    return kind if isinstance(kind, str) and kind in TTS_ERROR_KINDS else "other"


def retry_labels(retry: str, fallback_vendor: str) -> tuple[str, str]:
    """(vendor, kind) of a report's retry line, ``"anthropic: overloaded (HTTP 529):
    … (waited 0.20 s)"`` (a ``ProviderError``'s text); ``other`` for a kind it
    does not name, so a label never carries free text."""
    vendor, _, rest = retry.partition(": ")
    kind = rest.split(" ", 1)[0].rstrip(":")
    if kind not in ERROR_KINDS:
        return fallback_vendor, "other"
    return (vendor if vendor.isidentifier() else fallback_vendor), kind

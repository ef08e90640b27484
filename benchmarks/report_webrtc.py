"""The WebRTC-beside-WebSocket section of the benchmark report
(``benchmarks.bench_webrtc``): per transport and size, voice to voice, the
bandwidth and the server's CPU per session, each run's figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.scenario import Scenario
from benchmarks.table import table

WEBRTC_TITLE = "WebRTC beside the WebSocket (`serve`)"
# What this 2-core machine can drive: an aiortc caller costs about what the
# server's peer does, so 50 WebRTC callers in one process time out in the callers.
LEVELS = {"websocket": (1, 10, 50), "webrtc": (1, 10)}
RUNS, TURNS = 2, 2


def _runs(results: Sequence[dict[str, Any]], key: str, fmt: str) -> str:
    values = [r[key] for r in results if r[key] is not None]
    return " / ".join(format(v, fmt) for v in values) if values else "—"


def webrtc_section(results: Sequence[dict[str, Any]]) -> str:
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for result in results:
        groups.setdefault((result["transport"], result["sessions"]), []).append(result)
    rows = [
        (
            "WebRTC" if transport == "webrtc" else "WebSocket",
            sessions,
            _runs(runs, "v2v_ms_median", ".0f"),
            _runs(runs, "kbit_s", ".0f"),
            _runs(runs, "cpu_ms_per_session_s", ".1f"),
            sum(r["failed_turns"] for r in runs),
        )
        for (transport, sessions), runs in sorted(groups.items(), key=lambda g: (g[0][1], g[0][0]))
    ]
    figures = table(
        [
            "route",
            "sessions",
            "voice to voice, median (ms)",
            "both ways per session (kbit/s)",
            "server CPU (ms per session-second)",
            "turns failed",
        ],
        rows,
    )
    return "\n\n".join(
        [
            f"## {WEBRTC_TITLE}",
            "The voice serve benchmark's cloud fakes (fixed service times) and one "
            "`voice-membrane serve` process; each caller says the recorded question "
            "in real time and again after each answer, over `/v1/session` (16 kHz "
            "pcm16 in, 24 kHz out) or over WebRTC (`POST /v1/webrtc/offer`, Opus both "
            f"ways). {TURNS} turns a session, {RUNS} runs a size, each run's figure "
            "(`a / b`). Voice to voice: the question's last voiced sample leaving the "
            "caller to the answer's first sound arriving (over WebRTC after the jitter "
            "buffer and the decoder). Bandwidth: bytes both ways per session-second, "
            "without IP, UDP or TCP headers. CPU: the serve process's.",
            figures,
            "WebRTC at 50 sessions is not measured here: the aiortc callers run in "
            "the benchmark's own process and cost about what the server's peers do "
            "(Opus and SRTP in Python), so on this 2-core machine their turns time "
            "out in the callers ([webrtc.md](webrtc.md)).",
        ]
    )


def run_webrtc_bench() -> list[dict[str, Any]]:
    from benchmarks.bench_webrtc import run

    results: list[dict[str, Any]] = []
    for transport, levels in LEVELS.items():
        results += run(list(levels), RUNS, TURNS, (transport,))
    return results


SCENARIO = Scenario(
    "webrtc",
    (WEBRTC_TITLE,),
    run_webrtc_bench,
    lambda r: [webrtc_section(r)],
    True,
    (ImportError, RuntimeError),  # ImportError: no aiortc (the webrtc extra)
)

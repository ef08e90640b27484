"""The WebRTC-beside-WebSocket section of the benchmark report
(``benchmarks.webrtc``): per transport and size, voice to voice, the
bandwidth and the server's CPU per session, each run's figure; its words are
``sections/webrtc.md``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.prose import prose, title
from benchmarks.scenario import Scenario
from benchmarks.table import Column, Table

WEBRTC_TITLE = title("webrtc")
# What this 2-core machine can drive: an aiortc caller costs about what the
# server's peer does, so 50 WebRTC callers in one process time out in the callers.
LEVELS = {"websocket": (1, 10, 50), "webrtc": (1, 10)}
RUNS, TURNS = 2, 2

Group = tuple[str, int, list[dict[str, Any]]]  # transport, sessions, its runs' results


def _runs(group: Group, key: str, fmt: str) -> str:
    """Each run's figure, "a / b" (not a spread: a run or two, each a median)."""
    values = [r[key] for r in group[2] if r[key] is not None]
    return " / ".join(format(v, fmt) for v in values) if values else "—"


TABLE: Table[Group] = Table(
    [
        Column("route", lambda g: "WebRTC" if g[0] == "webrtc" else "WebSocket"),
        Column("sessions", lambda g: g[1]),
        Column("voice to voice, median (ms)", lambda g: _runs(g, "v2v_ms_median", ".0f")),
        Column("both ways per session (kbit/s)", lambda g: _runs(g, "kbit_s", ".0f")),
        Column(
            "server CPU (ms per session-second)", lambda g: _runs(g, "cpu_ms_per_session_s", ".1f")
        ),
        Column("turns failed", lambda g: sum(r["failed_turns"] for r in g[2])),
    ]
)


def webrtc_section(results: Sequence[dict[str, Any]]) -> str:
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for result in results:
        groups.setdefault((result["transport"], result["sessions"]), []).append(result)
    rows = [
        (t, n, runs) for (t, n), runs in sorted(groups.items(), key=lambda g: (g[0][1], g[0][0]))
    ]
    return prose("webrtc", turns=TURNS, runs=RUNS, table=TABLE.render(rows))


def run_webrtc_bench() -> list[dict[str, Any]]:
    from benchmarks.webrtc import run

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

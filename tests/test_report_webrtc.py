"""The WebRTC section of the benchmark report: a row per route and size, each
run's figure, sizes in order, failed turns summed, and why WebRTC stops at 10."""

from __future__ import annotations

from typing import Any

from benchmarks.webrtc_report import WEBRTC_TITLE, webrtc_section


def result(transport: str, sessions: int, v2v: float | None, run: int) -> dict[str, Any]:
    return {
        "transport": transport,
        "sessions": sessions,
        "v2v_ms_median": v2v,
        "kbit_s": 500.0 if transport == "websocket" else 140.0,
        "cpu_ms_per_session_s": 30.0 + run,
        "failed_turns": 1 if v2v is None else 0,
        "run": run,
    }


def test_a_row_per_route_and_size_with_each_runs_figure() -> None:
    results = [
        result("webrtc", 10, 1190.0, 1),
        result("webrtc", 10, None, 2),
        result("websocket", 1, 1107.0, 1),
        result("websocket", 1, 1106.4, 2),
        result("webrtc", 1, 1187.0, 1),
    ]
    section = webrtc_section(results)
    assert section.startswith(f"## {WEBRTC_TITLE}")
    rows = [line for line in section.splitlines() if line.startswith("| Web")]
    assert rows == [
        "| WebRTC | 1 | 1187 | 140 | 31.0 | 0 |",
        "| WebSocket | 1 | 1107 / 1106 | 500 / 500 | 31.0 / 32.0 | 0 |",
        "| WebRTC | 10 | 1190 | 140 / 140 | 31.0 / 32.0 | 1 |",
    ]
    assert "50 sessions is not measured" in section

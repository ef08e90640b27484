"""The serve load benchmark: it runs and renders a row per size; its verdict
against issue 27's and 45's targets; the bare client and the delivery floor
beside it."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from benchmarks.serve_load import run_serve_load_bench
from benchmarks.serve_load_report import SERVE_TITLE, serve_section
from voice_membrane.bench.delivery_floor import DeliveryServer, deliver
from voice_membrane.bench.load_client import ClientPlan, TurnRecord
from voice_membrane.bench.serve_load import (
    Ideal,
    LevelResult,
    LoadScript,
    LoadSetup,
    ServeLoadResults,
)
from voice_membrane.server.pacing import LEAD_S


def test_serve_load_benchmark_runs_and_renders_a_row_per_size() -> None:
    # Two sessions, one turn each: the fakes, the server and a client process all run;
    # the turns must have played audio without an error. Numbers are not checked.
    # Once on one process, once on serve --workers 2, once all at once (burst),
    # and the bare protocol client in the server's place.
    results = run_serve_load_bench(
        levels=(2,),
        turns=1,
        ramp_s=0.2,
        log=lambda _: None,
        workers=(1, 2),
        burst_levels=(2,),
        bare_levels=(2,),
    )
    assert [(lv.sessions, lv.workers, lv.burst, lv.bare) for lv in results.levels] == [
        (2, 1, False, False),
        (2, 2, False, False),
        (2, 1, True, False),
        (2, 1, False, True),
    ]
    for level in results.levels:
        assert len(level.turns) == level.sessions
        assert level.error_count() == 0, (level.errors, [t.errors for t in level.turns])
        for turn in level.turns:
            assert turn.first_audio_ms is not None and turn.frames > 10 and turn.audio_s > 1
            assert level.bare or turn.server.get("first_audio") is not None
            # the fakes only ever sleep longer than scripted: no first audio comes
            # before the ideal (a bare client cutting too early would)
            assert turn.first_audio_ms >= results.ideal.first_audio_ms - 2
        assert level.server_cpu_cores > 0
        # the bare client's audio paced out to clients, measured beside it
        assert (level.delivery_ms_per_audio_s is not None) == level.bare
        assert level.delivery_ms_per_audio_s is None or level.delivery_ms_per_audio_s > 0
        cpu = level.server_cpu_cores * level.seconds * 1000 / sum(t.audio_s for t in level.turns)
        assert level.cpu_ms_per_audio_s == pytest.approx(cpu)
    assert results.ideal.first_piece and results.ideal.first_audio_ms > 400
    section = serve_section(results)
    assert section.startswith(f"## {SERVE_TITLE}")
    for workers in ("1", "2"):
        rows = [line for line in section.splitlines() if line.startswith(f"| 2 | {workers} |")]
        assert len(rows) == 2  # the load table and the stage table
        cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
        assert cells[:3] == ["2", workers, "2"] and cells[6] == "0"  # sessions, turns, errors
        assert cells[8].endswith(" ms") and float(cells[8].removesuffix(" ms")) > 0
    burst = [line for line in section.splitlines() if line.startswith("| 2, burst | 1 |")]
    assert len(burst) == 2  # the load table and the stage table
    bare = [line for line in section.splitlines() if line.startswith("| 2, bare client | 1 |")]
    assert len(bare) == 1  # no server stamps: the load table only
    side = [line for line in section.splitlines() if line.startswith("- 2 session(s): served")]
    assert len(side) == 1 and "ms over the bare client's at p50 / p95" in side[0]
    assert "with its audio paced out to a client as well, the bare client would use" in side[0]
    assert "Target (200 sessions against one): not run at those sizes." in section


def _load_level(sessions: int, first_audio_ms: list[float], **kw: Any) -> LevelResult:
    turns = [TurnRecord(n, first_audio_ms=ms, audio_s=3.0) for n, ms in enumerate(first_audio_ms)]
    fields: dict[str, Any] = {
        "errors": [],
        "clients": 1,
        "client_lag_ms": [1.0],
        "client_cpu_cores": 0.1,
        "fakes_cpu_cores": 0.1,
        "server_rss_base_mb": 100.0,
        "server_rss_peak_mb": 110.0,
        "seconds": 10.0,
    }
    return LevelResult(sessions, turns, **(fields | kw))


def _load_results(*levels: LevelResult) -> ServeLoadResults:
    script = LoadScript("Hi there.", 0.3, 0.025, 4, 0.1, 0.8)
    client = ClientPlan("Hi?", 24000, 1, 1.0, 0.5, 15.0)
    ideal = Ideal("Hi there.", 3, 450.0)
    return ServeLoadResults(LoadSetup(script, client, 100), list(levels), ideal, 0.05, 0, 0, 1)


def test_the_serve_load_verdict_is_issue_27s_target_against_one_session() -> None:
    single = _load_level(1, [500.0, 510.0, 520.0], server_cpu_cores=0.001)
    # 200 sessions, 600 turns of 3 s of audio (1800 s) in 10 s: 0.3 cores is 1.7 ms a second
    ok = _load_level(200, [540.0] * 600, server_cpu_cores=0.3)
    verdict = serve_section(_load_results(single, ok))
    assert "(here 550 ms)" in verdict and ": **met**." in verdict
    late = _load_level(200, [540.0] * 560 + [560.0] * 40, server_cpu_cores=0.3)
    assert "first-audio p95 560 ms > 550 ms." in serve_section(_load_results(single, late))
    busy = _load_level(200, [540.0] * 600, server_cpu_cores=0.9)
    assert "— server CPU 5.0 ms per second of audio." in serve_section(_load_results(single, busy))
    burst = _load_level(200, [540.0] * 600, server_cpu_cores=0.3, burst=True)
    assert "not run at those sizes" in serve_section(_load_results(single, burst))


def test_with_a_bare_client_at_200_the_cpu_target_is_issue_45s_ratio_to_it() -> None:
    single = _load_level(1, [500.0, 510.0, 520.0], server_cpu_cores=0.001)
    bare = _load_level(200, [505.0] * 600, server_cpu_cores=0.3, bare=True)  # 1.7 ms a second
    served = _load_level(200, [540.0] * 600, server_cpu_cores=0.45)  # 2.5 ms: 1.5x
    section = serve_section(_load_results(single, served, bare))
    assert "≤ 1.5x the bare client's (here 2.5 ms)" in section and ": **met**." in section
    assert "2.5 ms served, 1.7 ms bare (1.5x; target ≤ 1.5x)." in section
    dearer = _load_level(200, [540.0] * 600, server_cpu_cores=0.6)  # 3.3 ms: 2x
    section = serve_section(_load_results(single, dearer, bare))
    assert "— server CPU 3.3 ms per second of audio." in section


def test_the_bare_clients_cpu_is_shown_with_its_audio_paced_out_to_a_client() -> None:
    single = _load_level(1, [500.0, 510.0, 520.0], server_cpu_cores=0.001)
    served = _load_level(200, [540.0] * 600, server_cpu_cores=0.6)  # 3.3 ms a second
    bare = _load_level(
        200, [505.0] * 600, server_cpu_cores=0.3, bare=True, delivery_ms_per_audio_s=0.5
    )
    section = serve_section(_load_results(single, served, bare))
    assert (
        "3.3 ms served, 1.7 ms bare (2.0x; target ≤ 1.5x); with its audio paced out to a "
        "client as well, the bare client would use 2.2 ms (1.3x its own; served: 1.5x that)."
    ) in section
    unmeasured = _load_level(200, [505.0] * 600, server_cpu_cores=0.3, bare=True)
    assert "paced out to a client as well" not in serve_section(
        _load_results(single, served, unmeasured)
    )


def test_the_delivery_floor_runs_its_sessions_over_real_sockets() -> None:
    plan = ClientPlan("Hi?", 24000, 2, 0.0, 0.1, 15.0, frame_ms=60)
    result = anyio.run(deliver, plan, 3, 0.6, 0)
    assert result["errors"] == 0 and result["cpu_s"] > 0
    assert result["audio_s"] == pytest.approx(3 * 2 * 0.6)  # 3 sessions, 2 turns of 0.6 s


class _RecordingSocket:
    """Stands in for a client's connection: when each frame was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, bytes]] = []

    async def send(self, frame: bytes) -> None:
        self.sent.append((time.perf_counter(), frame))

    async def close(self) -> None:
        pass


def test_the_delivery_floor_paces_audio_as_the_socket_sink_does() -> None:
    plan = ClientPlan("Hi?", 24000, 2, 0.0, 0.1, 15.0, frame_ms=60)
    server = DeliveryServer(plan, 1, 1.2, 0)
    socket = _RecordingSocket()
    anyio.run(server.handler, socket)
    assert len(socket.sent) == 2 * 20  # two turns of 1.2 s in 60 ms frames
    assert all(len(frame) == 8 + 2 * 1440 for _, frame in socket.sent)
    first_turn = [at for at, frame in socket.sent if frame[:4] == (1).to_bytes(4, "little")]
    start = first_turn[0]
    for index, at in enumerate(first_turn):
        # never more than the lead ahead of a client that plays from the first frame
        assert (index * 0.06) - (at - start) <= LEAD_S + 1e-3
    assert first_turn[-1] - start >= 1.2 - LEAD_S - 0.06  # not all at once
    assert socket.sent[20][0] - first_turn[-1] >= 0.1  # the think time after it played


def test_the_bare_client_is_put_to_the_latency_target_and_never_taken_for_served() -> None:
    bare_one = _load_level(1, [500.0, 502.0, 504.0], server_cpu_cores=0.001, bare=True)
    late_floor = _load_level(200, [505.0] * 560 + [560.0] * 40, server_cpu_cores=0.3, bare=True)
    section = serve_section(_load_results(bare_one, late_floor))
    # Bare rows alone: no served run to judge, none compared with itself.
    assert "not run at those sizes." in section and "served first audio" not in section
    assert "The bare client at 200 sessions misses it too: first-audio p95 560 ms" in section
    assert "p50 + 40 ms (542 ms)." in section
    single = _load_level(1, [500.0, 510.0, 520.0], server_cpu_cores=0.001)
    served = _load_level(200, [540.0] * 600, server_cpu_cores=0.45)
    on_time = _load_level(200, [505.0] * 600, server_cpu_cores=0.3, bare=True)
    section = serve_section(_load_results(single, served, bare_one, on_time))
    assert "The bare client at 200 sessions meets it: first-audio p95 505 ms" in section

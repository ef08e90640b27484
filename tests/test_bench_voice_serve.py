"""The voice-over-the-endpoint benchmark, CI-sized: two callers, one question
each (and two interrupting their answer, on /v1/session and on a phone call),
through the real serve process, fakes and caller processes. Shape and
completeness only: speed is the benchmark's to measure, never asserted here."""

from __future__ import annotations

import json

import pytest

from benchmarks.voice_serve import QUESTION_TEXT, run_voice_serve_bench
from benchmarks.voice_serve_report import VOICE_SERVE_TITLE, voice_serve_section
from voice_membrane.bench.voice_caller import REPLY_STAMPS, SERVER_FIGURES
from voice_membrane.bench.voice_serve import voiced_span
from voice_membrane.bench.voice_serve_figures import FIGURES

pytest.importorskip("deepgram")
pytest.importorskip("onnxruntime")


def test_two_callers_each_get_their_answer_and_the_record_says_where_the_time_went() -> None:
    results = run_voice_serve_bench(
        levels=(2,),
        phone_levels=(),
        phone_barge_levels=(2,),
        barge_levels=(2,),
        two_worker_levels=(),
        turns=1,
        barge_turns=1,
        ramp_s=0.2,
        log=lambda _: None,
    )
    (level,) = results.levels
    assert level.callers == 2 and not level.errors
    assert len(level.turns) == 2 and level.answered() == level.turns
    plan = results.setup.plan
    for turn in level.turns:
        assert turn.number == 1 and turn.turn is not None and not turn.errors
        assert turn.heard == QUESTION_TEXT  # the fake STT heard it, the server turned it
        assert turn.voice_to_voice_ms is not None and turn.audio_s > 0
        assert turn.speech_end_position_ms is not None and turn.detector_end_ms is not None
        assert set(turn.server) == {*SERVER_FIGURES, *REPLY_STAMPS}
        assert all(value is not None for value in turn.server.values())
    # The voiced end the callers date is the question's, found from its level.
    assert plan.voiced_end == voiced_span(plan.question, plan.sample_rate)[1]
    summary = json.loads(json.dumps(results.summary()))
    (row,) = summary["levels"]
    assert row["answered"] == row["turns"] == 2 and row["errors"] == {}
    assert set(row["figures_ms"]) == set(FIGURES)
    assert row["figures_ms"]["barge_in"] is None  # nobody interrupted here
    del row["figures_ms"]["barge_in"]
    assert all(set(v) == {"p50", "p95", "max"} for v in row["figures_ms"].values())
    # The barge-in levels: every answer stopped by "stop" — on /v1/session paused,
    # then interrupted; on a phone call (the fake Twilio caller) cleared.
    session, phone = results.barge
    assert (session.route, phone.route) == ("session", "twilio")
    for level, actions in ((session, ["pause", "interrupt"]), (phone, ["clear"])):
        assert level.barge and len(level.turns) == 2 and level.answered() == level.turns
        for turn in level.turns:
            assert turn.barge_in_ms is not None and turn.barge_in == actions
            assert turn.voice_to_voice_ms is not None
    assert all(row["figures_ms"]["barge_in"] is not None for row in summary["barge_in"])
    assert summary["engines_ms"]["total_ms"] == pytest.approx(
        summary["engines_ms"]["endpointing_ms"] + summary["engines_ms"]["reply_ms"]
    )
    section = voice_serve_section(results)
    assert section.startswith(f"## {VOICE_SERVE_TITLE}")
    assert "| 2, /v1/session | 2 / 2 |" in section and "`pause → interrupt` 2" in section
    assert "| 2, /v1/twilio | 2 / 2 |" in section and "`clear` 2" in section

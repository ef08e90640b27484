"""Barge-in by voice with real audio, in real time: a live user (the Piper
fixtures) says "mm-hm" over the reply — its audio pauses and resumes, no turn
— then "stop" — it pauses and is interrupted, the history keeps only what was
heard, and "stop" is the next turn. The benchmark's own loop
(``voice_membrane/bench/bargein.py``) for one round; its latencies are the
benchmark's business, not this test's."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from voice_membrane.bench.bargein import REPLY, run_bargein
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.voice_loop import turn_record

pytest.importorskip("pocketsphinx")


ROOT = Path(__file__).resolve().parent.parent


def test_a_backchannel_pauses_and_resumes_and_stop_interrupts(tmp_path: Path) -> None:
    # pocketsphinx, not the default whisper: this is the barge-in's mechanics (pause,
    # resume, interrupt), which any recognizer drives; pocketsphinx settles "mm-hm" and
    # "stop" in real time on a shared CPU, where each whisper decode costs ~0.5 s.
    base = load_pipeline(ROOT / "pipelines" / "local-voice.toml").with_overrides(
        {"stt": {"spec": "pocketsphinx"}}
    )

    async def go() -> object:
        with anyio.fail_after(120):
            return await run_bargein(base, tmp_path, rounds=1)

    run = anyio.run(go)
    mm_hm, stop = run.trials  # type: ignore[attr-defined]
    assert (mm_hm.clip, mm_hm.outcome) == ("mm_hm", "resumed")
    assert (stop.clip, stop.outcome) == ("stop", "interrupted")
    for trial in (mm_hm, stop):  # the audio was paused, after the speech began
        assert trial.pause_ms is not None and 0 < trial.pause_ms < trial.end_ms

    first, second = run.turns  # type: ignore[attr-defined]
    assert "weather" in first.heard.text  # "mm-hm" was no turn; "stop" is the next
    assert [p.outcome for p in first.pauses] == ["resumed", "interrupted"]
    assert first.result.report.interrupted
    heard = first.result.spoken_text
    assert heard and REPLY.startswith(heard.strip()[:40]) and len(heard) < len(REPLY)
    record = turn_record(first)
    assert [p["outcome"] for p in record["playout_pauses"]] == ["resumed", "interrupted"]
    assert second.heard.text

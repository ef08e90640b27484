"""A silence while the reply waits on a tool round is a tool pause, not the TTS
falling behind playback; a real TTS underrun is still a gap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voice_membrane.cli.main import main
from voice_membrane.pipeline.metrics import TurnMetrics

REPO = Path(__file__).resolve().parent.parent
# Text, a tool call, its result ~1 s later, then the answer: at the recorded pace
# the audio of "Sure! Let me look that up for you." runs out before the answer's.
RECORDING = REPO / "audio_fixtures" / "streams" / "weather_tool_turn.jsonl"
MS = 1_000_000


def test_a_tool_round_is_no_tts_gap_in_a_real_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline = tmp_path / "tool.toml"
    pipeline.write_text(
        f'[llm]\nspec = "replay:{RECORDING}"\nreplay_speed = 1\n'
        '[tts]\nspec = "espeak"\n[sink]\nkind = "null"\nrealtime = false\n',
        encoding="utf-8",
    )
    metrics = tmp_path / "m.json"
    main(
        ["run", "--pipeline", str(pipeline), "--prompt", "Weather?", "--metrics-json", str(metrics)]
    )
    out = capsys.readouterr().out
    report = json.loads(metrics.read_text())
    assert report["tool_pauses"] >= 1 and report["tool_pause_ms"] > 0  # the silence was there
    assert report["audio_gaps"] == 0
    assert "fell behind" not in out
    assert "tool pauses:" in out


def test_an_underrun_without_a_tool_round_is_a_gap() -> None:
    m = TurnMetrics()
    m.note_audio(0, 0.5)  # plays until 500 ms
    m.note_audio(800 * MS, 0.5)  # 300 ms late: the TTS fell behind
    report = m.report(llm="l", tts="t", sink="s")
    assert (report.audio_gaps, report.audio_gap_ms, report.tool_pauses) == (1, 300.0, 0)
    assert "the TTS fell behind playback 1 time(s), 300 ms" in report.table()


def test_an_underrun_after_the_tool_round_ended_is_still_a_gap() -> None:
    m = TurnMetrics()
    m.note_audio(0, 0.5)
    m.note_tool_round(100 * MS)
    m.note_reply_goes_on(200 * MS)  # the answer came on while audio was still playing
    m.note_audio(900 * MS, 0.5)
    m.note_tool_round(1000 * MS)  # a second round, after this silence
    m.note_audio(1350 * MS, 0.1)  # in time: no silence
    report = m.report(llm="l", tts="t", sink="s")
    assert (report.audio_gaps, report.tool_pauses) == (1, 0)


@given(
    audio=st.lists(st.tuples(st.integers(1, 2000), st.integers(1, 1000)), max_size=12),
    tool=st.tuples(st.integers(0, 30_000), st.integers(0, 5000)),
)
def test_every_silence_is_counted_once_as_a_gap_or_a_tool_pause(
    audio: list[tuple[int, int]], tool: tuple[int, int]
) -> None:
    """Telling tool pauses apart never loses or doubles a silence."""
    plain, split = TurnMetrics(), TurnMetrics()
    split.note_tool_round(tool[0] * MS)
    split.note_reply_goes_on((tool[0] + tool[1]) * MS)
    at = 0
    for step, ms in audio:
        at += step * MS
        plain.note_audio(at, ms / 1000)
        split.note_audio(at, ms / 1000)
    assert split.gaps + split.tool_pauses == plain.gaps
    assert split.gap_ns + split.tool_pause_ns == plain.gap_ns

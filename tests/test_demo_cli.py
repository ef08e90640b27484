"""`voice-membrane demo`: the recorded turn through parser and chunker, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voice_membrane.cli.demo import DemoTimeline
from voice_membrane.cli.main import DEFAULT_RECORDING, main
from voice_membrane.providers.replay import load_recording


def test_timeline_speaks_only_the_visible_text_without_markup() -> None:
    recording = load_recording(DEFAULT_RECORDING)
    timeline = DemoTimeline()
    for delta in recording.deltas:
        timeline.feed(delta.t_ms, delta.text)
    timeline.finish(recording.deltas[-1].t_ms)

    spoken = "".join(timeline.spoken)
    assert spoken.startswith("Sure! Let me look that up for you.")
    assert "18.5 degrees" in spoken and "**" not in spoken
    for hidden in ("should call the forecast tool", "get_forecast", "high_c", "<", ">"):
        assert hidden not in spoken
    assert "should call the forecast tool" in "".join(timeline.hidden_text)
    assert dict(timeline.block_types) == {
        "thinking": 1,
        "text": 2,
        "tool_call": 1,
        "tool_result": 1,
    }
    # The first piece goes out within a few deltas of the first visible text.
    assert timeline.first_visible is not None and timeline.first_piece is not None
    assert timeline.first_piece[0] - timeline.first_visible[0] <= 5


def test_text_before_a_tool_call_is_spoken_before_the_call_completes() -> None:
    timeline = DemoTimeline()
    timeline.feed(0, "Let me check that.")
    timeline.feed(10, '<function_calls><invoke name="f">')
    assert "".join(timeline.spoken) == "Let me check that."


def test_cli_demo_prints_the_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    main(["demo", str(DEFAULT_RECORDING)])
    out = capsys.readouterr().out
    assert "┌ block 0 thinking  (hidden)" in out
    assert '▶ speak [first] "Sure!"' in out
    assert "tool_call get_forecast" in out
    assert "first speakable piece" in out


def test_cli_demo_bad_recording_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"format": "voice-membrane-replay", "version": 1}) + "\n{oops\n")
    with pytest.raises(SystemExit) as excinfo:
        main(["demo", str(bad)])
    assert str(excinfo.value) == (
        f"voice-membrane demo: {bad}:2: invalid JSON: "
        "Expecting property name enclosed in double quotes (column 2)"
    )
    with pytest.raises(SystemExit) as excinfo:
        main(["demo", str(tmp_path / "missing.jsonl")])
    assert "no such recording file" in str(excinfo.value)

"""A recording carries its model's tool syntax (a ``tool_syntax`` header key): the
shipped recordings never speak a tool call, played by ``demo`` or by ``run``
with the default pipeline; a pipeline that names a syntax still wins."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import pytest

from voice_membrane.cli.main import main
from voice_membrane.cli.run import resolve_config, run_assistant
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.providers.replay import RecordingError, load_recording

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = sorted((ROOT / "audio_fixtures" / "streams").glob("*.jsonl"))
JSON_TURN = ROOT / "audio_fixtures" / "streams" / "json_tool_turn.jsonl"
CALL_MARKS = ("<tool_call", "tool_call>", '"arguments"', "<function_calls", "<invoke")


def test_the_json_recording_says_its_syntax() -> None:
    assert load_recording(JSON_TURN).tool_syntax == "json"


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_demo_never_speaks_a_shipped_recordings_call(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["demo", str(path), "--speed", "0"])
    spoken = [line for line in capsys.readouterr().out.splitlines() if "▶ speak" in line]
    assert spoken
    assert not any(mark in line for line in spoken for mark in CALL_MARKS)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_run_with_the_default_pipeline_never_speaks_a_shipped_recordings_call(
    path: Path, tmp_path: Path
) -> None:
    config = resolve_config(
        None, llm=f"replay:{path}", tts="espeak", out=str(tmp_path / "r.wav")
    ).with_overrides({"llm": {"replay_speed": 0}})
    events = tmp_path / "e.jsonl"
    anyio.run(
        lambda: run_assistant(
            config, prompt="weather?", events_jsonl=events, out=io.StringIO().write
        )
    )
    records = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]
    said = [r["text"] for r in records if r.get("event") == "tts_input"]
    assert said
    assert not any(mark in text for text in said for mark in CALL_MARKS)


def test_a_pipeline_that_names_a_syntax_wins(tmp_path: Path) -> None:
    """Told the calls are XML, the pipeline does not read the JSON ones: what the
    pipeline file says is what runs (here, the JSON text goes to the voice)."""
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        f'[llm]\nspec = "replay:{JSON_TURN}"\ntool_syntax = "xml"\nreplay_speed = 0\n'
        '[tts]\nspec = "espeak"\n',
        encoding="utf-8",
    )
    config = resolve_config(pipeline, out=str(tmp_path / "x.wav"))
    assert load_pipeline(pipeline).llm.tool_syntax == "xml"
    events = tmp_path / "e.jsonl"
    anyio.run(
        lambda: run_assistant(
            config, prompt="weather?", events_jsonl=events, out=io.StringIO().write
        )
    )
    text = events.read_text(encoding="utf-8")
    assert "tool_call" in "".join(
        json.loads(line)["text"]
        for line in text.splitlines()
        if json.loads(line).get("event") == "tts_input"
    )


def test_a_bad_tool_syntax_in_a_recording_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    header = {"format": "voice-membrane-replay", "version": 1, "tool_syntax": "yaml"}
    bad.write_text(json.dumps(header) + "\n", encoding="utf-8")
    with pytest.raises(RecordingError, match=r"bad.jsonl:1: tool_syntax must be xml or json"):
        load_recording(bad)

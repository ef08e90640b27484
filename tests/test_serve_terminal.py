"""serve for a person at a terminal: Ctrl-C says it drains and a second Ctrl-C
stops now (a subprocess, as a shell sees it); log lines as text or JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.asyncio.client import connect

from tests.serve_helpers import GUARD_S, send, start, write_pipeline
from voice_membrane.cli.main import _parse
from voice_membrane.infra.redact import remember
from voice_membrane.server.log import JsonLog, TextLog, make_log

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parent.parent
# Minutes of speech at real time: only a stop that does not wait for it ends the test.
LONG = " ".join(f"This is sentence number {i} of a very long answer." for i in range(200))


def _serve(pipeline: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("VOICE_MEMBRANE_TOKEN", None)
    command = [sys.executable, "-m", "voice_membrane.cli", "serve", "--pipeline", str(pipeline)]
    return subprocess.Popen(
        [*command, "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


async def _stderr_until(process: subprocess.Popen[str], text: str, seen: list[str]) -> None:
    assert process.stderr is not None
    with anyio.fail_after(GUARD_S):
        while not any(text in line for line in seen):
            line = await anyio.to_thread.run_sync(process.stderr.readline)
            assert line, f"stderr ended before {text!r}: {seen}"
            seen.append(line)


async def test_ctrl_c_says_it_drains_and_a_second_ctrl_c_stops_now(tmp_path: Path) -> None:
    process = _serve(write_pipeline(tmp_path, "long", LONG), "--drain-timeout", "600")
    try:
        assert process.stdout is not None
        line = await anyio.to_thread.run_sync(process.stdout.readline)
        assert line.startswith("listening on http://127.0.0.1:"), line
        ws_url = "ws" + line.split()[-1].removeprefix("http") + "/v1/session"
        seen: list[str] = []
        async with connect(ws_url) as ws:
            await start(ws)
            await send(ws, type="user.message", text="Talk for a while")
            with anyio.fail_after(GUARD_S):
                while not isinstance(await ws.recv(), bytes):
                    pass  # speaking now
            process.send_signal(signal.SIGINT)
            await _stderr_until(process, "(Ctrl-C again to stop now)", seen)
            assert any("draining 1 turn (Ctrl-C again to stop now)" in s for s in seen), seen
            assert process.poll() is None  # still draining: the turn has minutes to go
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(GUARD_S):
                code = await anyio.to_thread.run_sync(process.wait)
        assert code == 130
        assert process.stderr is not None
        rest = process.stderr.read()
        assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest
        assert "stopping now" in rest
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_ctrl_c_with_no_turn_running_stops_promptly(tmp_path: Path) -> None:
    process = _serve(write_pipeline(tmp_path, "short", "Hi."), "--drain-timeout", "600")
    try:
        assert process.stdout is not None
        line = await anyio.to_thread.run_sync(process.stdout.readline)
        assert line.startswith("listening on"), line
        process.send_signal(signal.SIGINT)
        with anyio.fail_after(GUARD_S):
            code = await anyio.to_thread.run_sync(process.wait)
        assert code == 130
        assert process.stderr is not None
        err = process.stderr.read()
        assert "stopping (no turn running)" in err and "Traceback" not in err, err
        # Not a terminal: the log lines stay JSON, the one human line apart.
        records = [json.loads(s) for s in err.splitlines() if s.startswith("{")]
        assert [r["event"] for r in records][-1] == "drain_end"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_text_log_lines_are_readable_and_redacted() -> None:
    lines: list[str] = []
    secret = "sk-ant-api03-" + "x" * 40
    TextLog(lines.append)(
        "turn_end", session="ab12", first_audio_ms=212.5, interrupted=False, error=f"bad {secret}"
    )
    [line] = lines
    stamp, rest = line.split(" ", 1)
    assert time.strptime(stamp.split(".")[0], "%H:%M:%S")
    assert rest.startswith("turn_end session=ab12 first_audio_ms=212.5 interrupted=false error=")
    assert secret not in line and line.endswith("\n") and line.count("\n") == 1


def test_a_nested_value_is_fields_of_its_own_not_escaped_json() -> None:
    """``turn_end``'s stamps and voice to voice, readable: one line of key=value
    fields (a stamp that never came left out), no JSON escaped into a quote."""
    lines: list[str] = []
    TextLog(lines.append)(
        "turn_end",
        session="ab12",
        error=None,
        stamps_ms={"request_sent": 0.4, "first_token": 98.1, "last_audio": None},
        voice_to_voice={"endpointing_ms": 600.0, "preemptive": False, "nested": {"a b": 1}},
    )
    [line] = lines
    assert line.split(" ", 1)[1] == (
        "turn_end session=ab12 error=null stamps_ms.request_sent=0.4 "
        "stamps_ms.first_token=98.1 voice_to_voice.endpointing_ms=600.0 "
        'voice_to_voice.preemptive=false "voice_to_voice.nested.a b"=1\n'
    )


def test_json_log_lines_stay_json_and_redacted() -> None:
    lines: list[str] = []
    remember("a-session-token-of-some-length")
    JsonLog(lines.append)("refused", reason="a-session-token-of-some-length", code=4401)
    record = json.loads(lines[0])
    assert record["event"] == "refused" and record["code"] == 4401
    assert "a-session-token-of-some-length" not in lines[0]


@given(
    event=st.text(max_size=20),
    fields=st.dictionaries(
        st.text(max_size=10),
        st.one_of(
            st.text(),
            st.integers(),
            st.none(),
            st.lists(st.text(), max_size=3),
            st.dictionaries(st.text(max_size=5), st.one_of(st.text(), st.none()), max_size=3),
        ),
        max_size=4,
    ),
)
def test_a_text_line_is_one_line_whatever_the_values(event: str, fields: dict[str, object]) -> None:
    """Untrusted values (names, errors, model output) never make a second line
    nor send a terminal a control sequence."""
    lines: list[str] = []
    TextLog(lines.append)(event, **{f"k{i}{key}": v for i, (key, v) in enumerate(fields.items())})
    [line] = lines
    assert line.endswith("\n") and line[:-1].isprintable(), repr(line)


def test_auto_is_text_on_a_terminal_and_json_elsewhere() -> None:
    assert isinstance(make_log("auto", terminal=True), TextLog)
    assert isinstance(make_log("auto", terminal=False), JsonLog)
    assert isinstance(make_log("json", terminal=True), JsonLog)
    assert isinstance(make_log("text", terminal=False), TextLog)


def test_the_log_format_flag() -> None:
    assert _parse(["serve"]).log_format == "auto"
    assert _parse(["serve", "--log-format", "json"]).log_format == "json"
    assert _parse(["serve", "--log-format", "text"]).log_format == "text"
    with pytest.raises(SystemExit):
        _parse(["serve", "--log-format", "yaml"])

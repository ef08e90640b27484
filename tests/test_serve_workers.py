"""serve --workers N: several processes on one port (subprocesses, as an
orchestrator runs them). The kernel picks the worker of each connection, so the
tests open sessions until both workers hold some, then check what the group
does: one scrape counts them all, SIGTERM drains every worker, a killed worker
comes back."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.serve_helpers import GUARD_S, read_turn, send, start, write_pipeline
from tests.test_serve_drain import get
from voice_membrane.server.run import store_warning

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parent.parent
MEDIUM = "This answer takes a few seconds to say, so the server drains while it speaks."
MAX_SESSIONS_TRIED = 40  # 2 workers: all on one has odds of 2 ** -39


@dataclass
class Group:
    process: subprocess.Popen[str]
    url: str
    pids: list[int]
    log: list[dict[str, object]] = field(default_factory=list)

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http") + "/v1/session"

    def events(self, name: str) -> list[dict[str, object]]:
        return [record for record in list(self.log) if record.get("event") == name]

    def workers_with(self, name: str) -> set[object]:
        return {record.get("worker") for record in self.events(name)}

    async def wait_for(self, name: str, count: int = 1) -> None:
        with anyio.fail_after(GUARD_S):
            while len(self.events(name)) < count:
                await anyio.sleep(0.02)


@asynccontextmanager
async def serve_group(pipeline: Path, *extra: str) -> AsyncIterator[Group]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("VOICE_MEMBRANE_TOKEN", None)
    command = [sys.executable, "-m", "voice_membrane.cli", "serve", "--pipeline", str(pipeline)]
    process = subprocess.Popen(
        [*command, "--port", "0", "--workers", "2", "--log-format", "json", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        with anyio.fail_after(GUARD_S * 2):
            line = await anyio.to_thread.run_sync(process.stdout.readline)
            assert line.startswith("listening on http://127.0.0.1:"), line
            second = await anyio.to_thread.run_sync(process.stdout.readline)
        said = re.fullmatch(r"2 workers: pids (\d+), (\d+)\n", second)
        assert said, second
        group = Group(process, line.split()[-1], [int(pid) for pid in said.groups()])
        threading.Thread(target=_read_log, args=(process, group.log), daemon=True).start()
        yield group
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _read_log(process: subprocess.Popen[str], into: list[dict[str, object]]) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        try:
            into.append(json.loads(line))
        except ValueError:
            into.append({"event": "text", "line": line})


async def sessions_on_both(group: Group, stack: AsyncExitStack) -> list[ClientConnection]:
    """Sessions opened until each worker has logged one (kept open)."""
    opened: list[ClientConnection] = []
    while group.workers_with("session_start") != {"w1", "w2"}:
        assert len(opened) < MAX_SESSIONS_TRIED, group.workers_with("session_start")
        ws = await stack.enter_async_context(connect(group.ws_url))
        await start(ws)
        opened.append(ws)
        await group.wait_for("session_start", len(opened))
    return opened


async def read_turns(opened: list[ClientConnection]) -> list[dict[str, object]]:
    """Each session's ``turn.end``, read side by side (a client not read is dropped)."""
    ends: list[dict[str, object]] = [{} for _ in opened]

    async def one(i: int) -> None:
        ends[i] = (await read_turn(opened[i])).end

    async with anyio.create_task_group() as tg:
        for i in range(len(opened)):
            tg.start_soon(one, i)
    return ends


def metric(text: str, name: str) -> float:
    """The sum of a family's samples named exactly ``name`` (any labels)."""
    pattern = re.compile(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", re.MULTILINE)
    return sum(float(value) for value in pattern.findall(text))


async def scrape(group: Group) -> str:
    status, _, body = await get(group.url + "/metrics")
    assert status == 200
    return body.decode()


async def test_both_workers_serve_and_any_scrape_counts_all(tmp_path: Path) -> None:
    async with serve_group(write_pipeline(tmp_path, "short", "Hi! It is clear now.")) as group:
        async with AsyncExitStack() as stack:
            opened = await sessions_on_both(group, stack)
            for ws in opened:
                await send(ws, type="user.message", text="Hello")
            ends = await read_turns(opened)
            assert [end["heard"] for end in ends] == ["Hi! It is clear now."] * len(opened)
            # Each scrape reaches one worker or the other: every one counts both.
            for _ in range(8):
                text = await scrape(group)
                assert metric(text, "voice_membrane_sessions") == len(opened), text
                assert metric(text, "voice_membrane_turns_total") == len(opened)
                assert metric(text, "voice_membrane_first_audio_seconds_count") == len(opened)
                assert metric(text, "voice_membrane_active_turns") == 0
                assert metric(text, "voice_membrane_audio_streamed_seconds_total") > 0
                workers = set(
                    re.findall(r'process_cpu_seconds_total{pid="\d+",worker="(\w+)"}', text)
                )
                assert workers == {"parent", "w1", "w2"}, text
        group.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(GUARD_S):
            assert await anyio.to_thread.run_sync(group.process.wait) == 0


async def test_sigterm_drains_every_worker_and_exits_0(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path, "medium", MEDIUM)
    async with serve_group(pipeline, "--drain-timeout", "30") as group:
        async with AsyncExitStack() as stack:
            opened = await sessions_on_both(group, stack)
            for ws in opened:
                await send(ws, type="user.message", text="Talk for a while")
            for ws in opened:
                with anyio.fail_after(GUARD_S):
                    while not isinstance(await ws.recv(), bytes):
                        pass  # speaking now, on both workers
            group.process.send_signal(signal.SIGTERM)
            await group.wait_for("drain_start", 2)
            assert group.workers_with("drain_start") == {"w1", "w2"}
            for _ in range(6):  # whichever worker answers is draining
                assert (await get(group.url + "/readyz"))[0] == 503
            ends = await read_turns(opened)  # the running turns finish whole, on both workers
            assert all(end["interrupted"] is False and end["heard"] == MEDIUM for end in ends)
        with anyio.fail_after(GUARD_S):
            assert await anyio.to_thread.run_sync(group.process.wait) == 0
        assert group.workers_with("drain_end") == {"w1", "w2"}
        metrics_dir = group.events("workers")[0]["metrics_dir"]
        assert isinstance(metrics_dir, str) and not Path(metrics_dir).exists()  # removed


async def test_a_killed_worker_is_started_again(tmp_path: Path) -> None:
    async with serve_group(write_pipeline(tmp_path, "short", "Hi! It is clear now.")) as group:
        killed = group.pids[0]
        os.kill(killed, signal.SIGKILL)
        await group.wait_for("worker_restart")
        exit_ = group.events("worker_exit")[0]
        assert exit_["pid"] == killed and exit_["code"] == -signal.SIGKILL
        restarted = group.events("worker_restart")[0]
        assert restarted["worker"] == "w1" and restarted["pid"] not in group.pids
        text = await scrape(group)
        assert f'pid="{restarted["pid"]}",worker="w1"' in text
        assert f'pid="{killed}"' not in text
        async with AsyncExitStack() as stack:  # the restarted worker serves too
            opened = await sessions_on_both(group, stack)
            assert metric(await scrape(group), "voice_membrane_sessions") == len(opened)
        group.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(GUARD_S):
            assert await anyio.to_thread.run_sync(group.process.wait) == 0


async def test_ctrl_c_drains_the_group_and_exits_130(tmp_path: Path) -> None:
    async with serve_group(write_pipeline(tmp_path, "short", "Hi!")) as group:
        group.process.send_signal(signal.SIGINT)
        with anyio.fail_after(GUARD_S):
            assert await anyio.to_thread.run_sync(group.process.wait) == 130
        await group.wait_for("drain_end", 2)
        lines = [r["line"] for r in group.events("text")]
        assert lines == [
            f"voice-membrane serve: {store_warning('memory', 2)}\n",  # once listening
            "voice-membrane serve: draining 2 workers (Ctrl-C again to stop now)\n",
        ]


def test_a_group_on_the_memory_store_is_warned_that_resumes_miss() -> None:
    warning = store_warning("memory", 3)
    assert warning is not None and "1 time in 3" in warning and "Redis" in warning
    assert store_warning("memory", 1) is None  # one process: every resume finds it
    assert store_warning("redis://127.0.0.1:6379/0", 3) is None


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        pipeline = str(write_pipeline(tmp_path, "short", "Hi!"))
        command = [sys.executable, "-m", "voice_membrane.cli", "serve", "--pipeline", pipeline]
        done = subprocess.run(
            [*command, "--workers", "2", "--port", str(port)],
            capture_output=True,
            text=True,
            env=env,
            timeout=GUARD_S * 2,
        )
    assert done.returncode == 1
    assert (
        done.stderr
        == f"voice-membrane serve: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    )


def test_a_worker_that_cannot_start_stops_the_group_in_one_line(tmp_path: Path) -> None:
    # The parent reads the pipeline; the missing voice is found as a worker loads it.
    pipeline = write_pipeline(tmp_path, "broken", "Hi!", tts=f"piper:{tmp_path / 'none.onnx'}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "voice_membrane.cli", "serve", "--pipeline", str(pipeline)]
    done = subprocess.run(
        [*command, "--workers", "2", "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=GUARD_S * 2,
    )
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()  # (a long path is shortened in the line)
    assert line.startswith("voice-membrane serve: tts 'piper:/")
    assert line.endswith(": no such Piper model file")


async def test_workers_of_a_killed_parent_drain_and_exit(tmp_path: Path) -> None:
    async with serve_group(write_pipeline(tmp_path, "short", "Hi!")) as group:
        await group.wait_for("workers", 1)  # (logged just after the pids line)
        group.process.kill()  # no signal to pass on: the kernel tells the workers
        group.process.wait()
        await group.wait_for("drain_end", 2)
        with anyio.fail_after(GUARD_S):
            while any(Path(f"/proc/{pid}").exists() for pid in group.pids):
                await anyio.sleep(0.05)
    metrics_dir = group.events("workers")[0]["metrics_dir"]
    assert isinstance(metrics_dir, str)
    shutil.rmtree(metrics_dir)  # left by a parent killed outright

"""A ``voice-membrane serve`` process under measurement: started on a free
loopback port with a pipeline file, its URL read from its ready line, its CPU
time and resident memory read from ``/proc``."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

# The server's ready line names its URL (http:// for the page, ws:// for sessions).
_READY = re.compile(r"(?:http|ws)://(127\.0\.0\.1:[0-9]+)")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """A process's resident memory (``VmRSS``), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def group_pids(pid: int) -> list[int]:
    """A serve process and, for ``--workers N``, its worker processes (its children
    running ``voice_membrane.cli``; not an engine's own subprocess)."""
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return pids
    for child in map(int, children):
        try:
            if b"voice_membrane.cli" in Path(f"/proc/{child}/cmdline").read_bytes():
                pids.append(child)
        except OSError:
            pass  # gone
    return pids


def group_cpu_s(pids: Sequence[int]) -> float:
    """CPU seconds of a serve process and its workers, together."""
    return sum(cpu_s(pid) for pid in pids)


def group_rss_mb(pids: Sequence[int]) -> float:
    return sum(rss_mb(pid) for pid in pids)


@contextlib.contextmanager
def serve_process(
    pipeline: Path,
    env: dict[str, str],
    log: IO[str],
    workers: int = 1,
    options: Sequence[str] = (),
) -> Iterator[tuple[str, int]]:
    """``voice-membrane serve --workers N`` (and ``options``) on a free loopback
    port, its output in ``log``: (its ws:// URL, its pid; ``group_pids`` adds the
    workers')."""
    # --max-sessions 0: the benchmark measures past the default limit; --workers
    # never "auto": a run says how many it measured.
    command = [sys.executable, "-m", "voice_membrane.cli", "serve", "--pipeline", str(pipeline)]
    command += ["--host", "127.0.0.1", "--port", "0", "--max-sessions", "0"]
    command += ["--workers", str(workers), *options]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    try:
        url = _wait_ready(process, Path(log.name))
        yield url, process.pid
    finally:
        process.terminate()  # SIGTERM: the server drains (nothing is running by now)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


WARM_UP_TRIES = 12  # per worker: the kernel picks each session's worker


def warm_every_worker(warm: Callable[[], object], workers: int, log: Path) -> None:
    """``warm()`` (one warm-up turn) until each worker has ended a turn (the
    serve log's ``turn_end`` lines name their worker)."""
    for _ in range(WARM_UP_TRIES * workers):
        warm()
        if workers == 1:
            return
        ended = {
            record.get("worker")
            for line in log.read_text(errors="replace").splitlines()
            if line.startswith("{") and (record := json.loads(line)).get("event") == "turn_end"
        }
        if len(ended) >= workers:
            return
    raise RuntimeError(f"warm-up turns reached only some of the {workers} workers")


def _wait_ready(process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            # The ready line, not a worker's "listening" log line: a group is ready
            # once every worker is.
            match = _READY.search(line) if line.startswith("listening on ") else None
            if match:
                return f"ws://{match.group(1)}"
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"voice-membrane serve exited ({process.returncode}): {tail}")
        time.sleep(0.05)
    raise RuntimeError("voice-membrane serve printed no URL in time")

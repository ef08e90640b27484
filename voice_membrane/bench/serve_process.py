"""A ``voice-membrane serve`` process under measurement: started on a free
loopback port with a pipeline file, its URL read from its ready line, its CPU
time and resident memory read from ``/proc``."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
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


@contextlib.contextmanager
def serve_process(pipeline: Path, env: dict[str, str], log: IO[str]) -> Iterator[tuple[str, int]]:
    """``voice-membrane serve`` on a free loopback port, its output in ``log``:
    (its ws:// URL, its pid)."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voice_membrane.cli",
            "serve",
            "--pipeline",
            str(pipeline),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--max-sessions",
            "0",  # the benchmark measures past the default limit
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        env=env,
    )
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


def _wait_ready(process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            match = _READY.search(line)
            if match:
                return f"ws://{match.group(1)}"
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"voice-membrane serve exited ({process.returncode}): {tail}")
        time.sleep(0.05)
    raise RuntimeError("voice-membrane serve printed no URL in time")

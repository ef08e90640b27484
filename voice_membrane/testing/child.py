"""A helper process: ``python -m MODULE ARGS…`` that says one line on stdout when
it is ready (fake servers: their URLs; load clients: "connected") and runs until
its stdin closes — so it ends with the parent, even one that dies."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


class Child:
    def __init__(self, process: subprocess.Popen[str], what: str) -> None:
        self.process, self._what = process, what
        self._line: str | None = None

    @property
    def line(self) -> str:
        """The child's ready line (waits for it); the caller may work meanwhile."""
        if self._line is None:
            assert self.process.stdout is not None
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"{self._what} exited ({self.process.wait()})")
            self._line = line.strip()
        return self._line


@contextlib.contextmanager
def child_process(
    module: str,
    args: list[str],
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[Child]:
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield Child(process, f"{module} {' '.join(args[:1])}".strip())
    finally:
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

"""The log stream: every parser event and TTS input, as JSON Lines and on the console.

Both write bytes, so a lone surrogate in the text (which UTF-8 cannot encode) is
replaced with U+FFFD here too, whatever its source.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import IO, Any, TextIO

from ..surrogates import replace_surrogates


class JsonlEventLog:
    """Writes one JSON object per line, each with ``t_ms`` since the turn's request."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[str] = self.path.open("w", encoding="utf-8")
        self._t0 = time.perf_counter_ns()

    def start_turn(self, t0_ns: int) -> None:
        self._t0 = t0_ns

    def __call__(self, record: dict[str, Any]) -> None:
        t_ms = round((time.perf_counter_ns() - self._t0) / 1e6, 3)
        line = json.dumps({**record, "t_ms": t_ms}, ensure_ascii=False)
        self._file.write(replace_surrogates(line) + "\n")

    def close(self) -> None:
        self._file.close()


class HiddenBlockPrinter:
    """``--show-hidden``: thinking and tool blocks on their own dimmed lines."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.dim = self.out.isatty()

    def __call__(self, record: dict[str, Any]) -> None:
        if record["event"] != "block_complete" or record["block"]["type"] == "text":
            return
        block = record["block"]
        kind = block["type"]
        if kind == "tool_call" and block["tool_name"]:
            body = f"{block['tool_name']}({json.dumps(block['input'], ensure_ascii=False)})"
        elif kind == "tool_call":  # no name: stray text kept hidden, or a call never run
            kind = "stray"
            body = block["content"] or json.dumps(block["input"], ensure_ascii=False)
        else:
            body = " ".join((block["content"] or "").split())
        line = replace_surrogates(f"[{kind}] {body}")
        print(f"\n\x1b[2m{line}\x1b[0m" if self.dim else f"\n{line}", file=self.out, flush=True)

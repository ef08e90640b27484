"""The log stream: every parser event and TTS input, as records (``event_record``)
written as JSON Lines and on the console.

Both write bytes, so a lone surrogate in the text (which UTF-8 cannot encode) is
replaced with U+FFFD here too, whatever its source.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path
from typing import IO, Any, TextIO

from ..infra.redact import redact
from ..infra.surrogates import replace_surrogates
from ..vocab.events import BlockStart, Chunk, ChunkMeta, Event
from .images import image_summary

EventLogger = Callable[[dict[str, Any]], None]
"""Receives one log record (``{"event": …, …}``) per parser event and TTS input."""


_META = tuple(field.name for field in fields(ChunkMeta))


def event_record(event: Event) -> dict[str, Any]:
    """A parser event as a JSON-ready log record (a generated image's data left
    out: its ``image`` record says where it went)."""
    if isinstance(event, Chunk):
        meta = event.meta  # (its fields are plain values: no ``asdict`` deep copy per chunk)
        return {"event": "chunk", "text": event.text, "meta": {f: getattr(meta, f) for f in _META}}
    if isinstance(event, BlockStart):
        record = {"event": "block_start", "index": event.index, "type": event.type}
        if event.type == "image":
            record["prompt"] = event.prompt
        return record
    block = event.block
    if block.type == "image":
        fields = {name: getattr(block, name) for name in block.__slots__ if name != "image"}
        fields["image"] = image_summary(block.image)
        return {"event": "block_complete", "index": event.index, "block": fields}
    return {"event": "block_complete", "index": event.index, "block": asdict(block)}


class OutputFileError(OSError):
    """A file the run writes (the events log, the metrics) could not be written;
    the message is one line naming the file and why."""


class JsonlEventLog:
    """Writes one JSON object per line, each with ``turn`` (1 for the first turn;
    0 before any) and ``t_ms`` since that turn's request.

    Lines are redacted (no key reaches the file). A failing write (a full disk)
    does not stop the turn: the log stops there and ``close`` raises
    ``OutputFileError`` saying why, after the turn has been spoken.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._file: IO[str] = self.path.open("w", encoding="utf-8")
        except OSError as exc:
            raise OutputFileError(f"cannot write {self.path}: {exc.strerror or exc}") from exc
        self._t0 = time.perf_counter_ns()
        self._failure: OSError | None = None
        self._turn = 0

    def start_turn(self, t0_ns: int) -> None:
        self._t0 = t0_ns
        self._turn += 1

    def __call__(self, record: dict[str, Any]) -> None:
        if self._failure is not None:
            return
        t_ms = round((time.perf_counter_ns() - self._t0) / 1e6, 3)
        line = redact(
            replace_surrogates(
                json.dumps({**record, "turn": self._turn, "t_ms": t_ms}, ensure_ascii=False)
            )
        )
        try:
            self._file.write(line + "\n")
        except OSError as exc:
            self._failure = exc

    def close(self) -> None:
        try:
            self._file.close()  # flushes: a full disk often shows only here
        except OSError as exc:
            self._failure = self._failure or exc
        if self._failure is not None:
            reason = self._failure.strerror or self._failure
            raise OutputFileError(f"cannot write {self.path}: {reason}")


class HiddenBlockPrinter:
    """``--show-hidden``: thinking and tool blocks on their own dimmed lines."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.dim = self.out.isatty()

    def __call__(self, record: dict[str, Any]) -> None:
        if record["event"] != "block_complete" or record["block"]["type"] in ("text", "image"):
            return  # (an image is said where it was saved, by its own record)
        block = record["block"]
        kind = block["type"]
        if kind == "tool_call" and block["tool_name"]:
            body = f"{block['tool_name']}({json.dumps(block['input'], ensure_ascii=False)})"
        elif kind == "tool_call":  # no name: stray text kept hidden, or a call never run
            kind = "stray"
            body = block["content"] or json.dumps(block["input"], ensure_ascii=False)
        else:
            body = " ".join((block["content"] or "").split())
        line = redact(replace_surrogates(f"[{kind}] {body}"))
        print(f"\n\x1b[2m{line}\x1b[0m" if self.dim else f"\n{line}", file=self.out, flush=True)

"""Structured logs: one JSON object per line, one line per session event.

Every line is redacted whole (``redact.py``), nested values too: a provider
error may quote a key; the session token is never passed here at all (and is
masked by value if it were).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from ..infra.redact import redact

Write = Callable[[str], None]
Log = Callable[..., None]
"""What the server logs with: ``log(event, **fields)`` (a ``JsonLog``, or a test's own)."""


def _stderr(line: str) -> None:
    sys.stderr.write(line)
    sys.stderr.flush()


class JsonLog:
    def __init__(self, write: Write = _stderr) -> None:
        self._write = write

    def __call__(self, event: str, **fields: Any) -> None:
        record = {"ts": round(time.time(), 3), "event": event}
        record.update(fields)
        self._write(redact(json.dumps(record, ensure_ascii=False, default=str)) + "\n")

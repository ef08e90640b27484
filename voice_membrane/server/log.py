"""Structured logs, one line per session event: JSON objects for a log
collector, or ``HH:MM:SS.mmm event key=value …`` for a person at a terminal.

Every line is redacted whole (``redact.py``), nested values too: a provider
error may quote a key; the session token is never passed here at all (and is
masked by value if it were). A text line is one line whatever the values hold:
a value with a space, a quote, a control or format character is written as a
JSON string with those escaped (no newline, no terminal escape gets out).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, Final, Literal

from ..infra.redact import redact

Write = Callable[[str], None]
Log = Callable[..., None]
"""What the server logs with: ``log(event, **fields)`` (a ``JsonLog``, or a test's own)."""
LogFormat = Literal["auto", "json", "text"]
LOG_FORMATS: Final = ("auto", "json", "text")


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


class TextLog:
    """``12:34:56.789 turn_end session=ab12 first_audio_ms=212.5 interrupted=false``.
    A mapping's fields are fields of their own, named by their path
    (``stamps_ms.first_audio=212.5``; one that is None left out): not JSON
    escaped into one quoted value."""

    def __init__(self, write: Write = _stderr) -> None:
        self._write = write

    def __call__(self, event: str, **fields: Any) -> None:
        now = time.time()
        stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"
        parts = [stamp, _value(event)]
        parts += [f"{_value(key)}={_value(value)}" for key, value in _flat(fields, "")]
        self._write(redact(" ".join(parts)) + "\n")


def _flat(fields: dict[Any, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    for key, value in fields.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from ((k, v) for k, v in _flat(value, f"{name}.") if v is not None)
        else:
            yield name, value


def make_log(log_format: LogFormat = "auto", *, terminal: bool | None = None) -> Log:
    """``auto``: text lines when stderr is a terminal, JSON otherwise."""
    if log_format == "auto":
        if terminal is None:
            terminal = _stderr_is_terminal()
        log_format = "text" if terminal else "json"
    return TextLog() if log_format == "text" else JsonLog()


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced, or closed
        return False


def _value(value: Any) -> str:
    """A bare word when it is one; else a JSON string (lists and objects as JSON)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    text = value if isinstance(value, str) else _dumped(value)
    if text and text.isprintable() and not any(c in text for c in ' "=\\'):
        return text
    return _quoted(text)


def _dumped(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # a circular structure: its str, quoted
        return str(value)


def _quoted(text: str) -> str:
    # json.dumps escapes C0 controls; C1 controls (a terminal's CSI), format
    # characters (bidi overrides), separators and surrogates are escaped here too.
    dumped = json.dumps(text, ensure_ascii=False)
    if dumped.isprintable():
        return dumped
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in dumped)

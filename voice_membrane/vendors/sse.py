"""Server-sent events (sans-I/O): the bytes of a ``text/event-stream`` body → events.

Written for the vendors' streamed replies, read without their SDKs' per-chunk
objects (``openai_stream.py``). It follows the WHATWG event-stream rules the
SDKs' own decoders follow: lines end in CRLF, LF or CR (a CRLF may be split
across two reads); a line starting with ``:`` is a comment (a keep-alive); a
field is ``name: value`` (one space after the colon dropped); ``data`` lines
join with LF; a blank line dispatches the event. Each line must be UTF-8: the
first that is not raises ``UnicodeDecodeError`` when it is reached, after every
event before it has been given out. At the end of the body an event not closed
by a blank line is dropped, as the spec and the SDKs do. ``id`` and ``retry``
are ignored (nothing reconnects), and an event with no ``data`` line is not
dispatched (the spec; e.g. a bare ``event: ping``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

_CR, _LF = 13, 10


@dataclass(frozen=True, slots=True)
class SseEvent:
    data: str
    event: str | None = None  # the ``event`` field; None when absent or empty


class SseDecoder:
    """``feed(bytes)`` as the body arrives: the events it completes, yielded
    lazily (a bad line raises where it is); ``end()`` when the body has ended."""

    def __init__(self) -> None:
        self._partial: list[bytes] = []  # the pieces of a line not yet ended
        self._skip_lf = False  # the last read ended in CR: an LF opening the next is its pair
        self._data: list[str] = []
        self._event: str | None = None

    def feed(self, chunk: bytes) -> Iterator[SseEvent]:
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if not chunk:
            return
        if b"\n" not in chunk and b"\r" not in chunk:  # the middle of a long line
            self._partial.append(chunk)
            return
        if self._partial:
            self._partial.append(chunk)
            chunk = b"".join(self._partial)
            self._partial = []
        lines = chunk.splitlines()  # bytes split at CR, LF and CRLF only
        last = chunk[-1]
        if last == _CR:
            self._skip_lf = True
        elif last != _LF:
            self._partial.append(lines.pop())  # not ended yet
        for line in lines:
            event = self._line(line)
            if event is not None:
                yield event

    def end(self) -> None:
        """The body ended. A last line without its line end is still read (so a
        bad one raises), but it cannot close an event: the open one is dropped."""
        if self._partial:
            line, self._partial = b"".join(self._partial), []
            self._line(line)
        self._data, self._event = [], None

    def _line(self, raw: bytes) -> SseEvent | None:
        line = raw.decode("utf-8")  # strict, as the SDKs decode each line
        if not line:
            if not self._data:
                self._event = None
                return None
            event = SseEvent("\n".join(self._data), self._event)
            self._data, self._event = [], None
            return event
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value or None
        # comments (empty name), id, retry and unknown fields: nothing to do
        return None

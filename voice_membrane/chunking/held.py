"""Filtered text a streaming stage holds back, with the raw span of each part.

The stages after ``MarkdownFilter`` (tables, speakable text) read ``Segment``\\ s and
write ``Segment``\\ s. ``HeldText`` keeps what a stage has not decided yet as one
string (``text[pos:]``) for the stage to scan, and the segments it came from, so
that whatever the stage keeps, replaces or drops carries its raw span along.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from .markdown import Segment


class HeldText:
    """Undecided text: ``text[pos:]``; ``keep``, ``replace`` and ``drop`` decide
    its first characters. ``out`` collects the decided segments; ``take_out``
    returns them and compacts the buffer (call it once per feed, so one big feed
    stays linear)."""

    def __init__(self) -> None:
        self.text = ""
        self.pos = 0
        self.out: list[Segment] = []
        self._segs: deque[Segment] = deque()  # the segments of text[pos:], in order
        self._taken_end = 0  # raw offset where the last decided character ended

    def add(self, segments: Iterable[Segment]) -> None:
        added = [seg for seg in segments if seg.text]
        self._segs.extend(added)
        self.text += "".join(seg.text for seg in added)

    def keep(self, n: int) -> None:
        """The next ``n`` characters are output as they are."""
        self.out.extend(self._take(n))

    def replace(self, n: int, text: str) -> None:
        """The next ``n`` characters (n > 0) are said as ``text`` (dropped if empty);
        ``text`` spans their whole raw span."""
        parts = self._take(n)
        if text:
            code = all(part.code for part in parts)  # (a URL inside inline code stays code)
            self.out.append(Segment(text, parts[0].start, parts[-1].end, code))

    def insert(self, text: str) -> None:
        """Say ``text`` before the next character, spanning no raw text."""
        at = self._segs[0].start if self._segs else self._taken_end
        self.out.append(Segment(text, at, at))

    def drop(self, n: int) -> None:
        self._take(n)

    def take_out(self) -> list[Segment]:
        self.text, self.pos = self.text[self.pos :], 0
        out, self.out = self.out, []
        return out

    def _take(self, n: int) -> list[Segment]:
        taken: list[Segment] = []
        self.pos += n
        while n > 0:
            seg = self._segs.popleft()
            size = len(seg.text)
            if size <= n:
                taken.append(seg)
                n -= size
                continue
            verbatim = seg.end - seg.start == size
            # A verbatim segment splits at the character; a substitution's parts each
            # keep its whole span (they stand for all of it together).
            mid = seg.start + n if verbatim else seg.end
            rest = seg.start + n if verbatim else seg.start
            taken.append(Segment(seg.text[:n], seg.start, mid, seg.code))
            self._segs.appendleft(Segment(seg.text[n:], rest, seg.end, seg.code))
            n = 0
        if taken:
            self._taken_end = taken[-1].end
        return taken

"""Streaming-safe markdown removal: markdown is formatting, never something to say.

``MarkdownFilter`` takes raw text in arbitrary pieces and returns ``Segment``\\ s:
output text plus the raw-input span ``[start, end)`` it came from. Each marker is
decided with the least lookahead it needs; only that is held back, everything else
is emitted at once. The output for a given input does not depend on how the input
was split (merge adjacent verbatim segments to compare).

Rules:

- Emphasis: runs of 1 to 3 ``*`` or ``_`` and exactly ``~~`` are removed when they
  flank text (a non-space on at least one side). ``2 * 3`` keeps its ``*``; so does
  ``2*3`` (digits on both sides). ``_`` inside a word (``snake_case``) is kept.
  A single ``~`` and longer runs are kept.
- At the start of a line, after optional indentation: ``#`` to ``######`` plus one
  space (a heading mark) is removed, ``#hashtag`` is kept; ``-``, ``*``, ``+`` plus
  one space (a bullet) and ``>`` plus one space (a quote, repeatable) are removed; a
  line made only of 3+ ``-``, ``*`` or ``_`` (spaces allowed) is removed, its newline
  kept. ``1.`` and ``1)`` list numbers are kept: they are spoken.
- A heading or a list item (bulleted or numbered) is a prosodic break: if its line
  does not end in punctuation (``.!?…:;,``, optionally followed by a closing quote
  or bracket), a ``.`` is inserted before its newline (a zero-width segment), so a
  voice reading pieces back to back pauses there (``## Steps`` → ``Steps.``).
- Inline code: the backtick run is removed; the content up to a run of the same
  length is copied verbatim (no markdown inside code) in segments marked ``code``.
  A code span ends at a newline.
- Fenced code: a line starting with 3+ backticks or tildes (for backticks, no
  backtick later on the line) opens a block that runs to a closing fence line (same
  character, at least as long) or the end of the stream. The block is skipped. With
  ``code_block_text`` set, that text is emitted as soon as the opening line is
  complete (speech does not wait for the block to end), as one segment whose span is
  the opening fence line; the rest of the block is then removed markup. The newline
  ending the closing fence line is kept.
- Links ``[text](url)`` become ``text`` and images ``![alt](url)`` become ``alt``:
  on ``[`` the filter holds back until the matching ``]`` (nested brackets counted)
  and the character after it. If that is ``(``, the URL is dropped up to its matching
  ``)`` (nested parentheses counted; a newline ends it). Otherwise the ``[`` is plain
  text (``[1]`` stays). The filter gives up, keeping ``[``, at a newline or after 200
  characters.
- ``\\`` before ASCII punctuation emits that punctuation literally (not a marker).
- Everything else (HTML, tables, bare URLs) passes through; ``TableFilter`` and
  ``SpeakableFilter`` take tables, URLs and symbols next.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from enum import Enum, auto


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of filtered output and the raw span ``[start, end)`` it came from.

    Text copied verbatim has ``end - start == len(text)``; a substitution (the
    ``code_block_text`` spoken for a fenced block) spans the opening fence line.
    ``code`` marks the content of an inline code span (the chunker never cuts in it).
    """

    text: str
    start: int
    end: int
    code: bool = False


class _NeedMore(Exception):
    """A decision needs characters that have not arrived yet."""


class _Mode(Enum):
    TEXT = auto()
    CODE = auto()  # inside an inline code span
    FENCE = auto()  # inside a fenced code block
    URL = auto()  # dropping the (url) part of a link


_PUNCT = frozenset(string.punctuation)
_BLANK = (" ", "\t")
_BLANK_CR = (" ", "\t", "\r")
# Characters that may start markup in running text; anything else is copied in runs.
_SPECIAL = frozenset("\n\\`*_~![")
_LINK_MAX = 200  # give up on a link whose bracket text runs longer than this
_FENCE_INFO_MAX = 200  # an opening fence line is accepted without its newline after this
_ITEM_ENDS = frozenset(".!?…:;,。！？")  # noqa: RUF001 (a heading ending so needs no ".")
_ITEM_CLOSERS = frozenset("\"'”’)]»")  # noqa: RUF001
_LIST_NUMBER_MAX = 9  # digits of a list number ("1." … "999999999.")


class MarkdownFilter:
    """Remove markdown from streamed text (see the module docstring for the rules).

    ``feed`` returns the segments it could decide; ``flush`` ends the stream
    (end-of-stream resolves any held marker) and resets the filter for reuse.
    """

    def __init__(self, *, code_block_text: str | None = None) -> None:
        self._code_block_text = code_block_text or None
        self._reset()

    def _reset(self) -> None:
        self._buf = ""  # raw text not consumed yet
        self._pos = 0  # index into _buf of the next character to decide
        self._base = 0  # raw offset of _buf[0]
        self._final = False
        self._out: list[Segment] = []
        # The verbatim output not yet in _out: _buf[_run_from:_run_to] (one raw slice, so
        # contiguous copies just extend it).
        self._run_from = self._run_to = -1
        self._run_code = False
        self._prev = ""  # last raw character consumed ("" at the start)
        self._line_start = True
        self._mode = _Mode.TEXT
        self._tick_len = 0
        self._fence_char = ""
        self._fence_len = 0
        self._fence_line_start = False
        self._url_depth = 0
        self._link_close: list[int] = []  # raw offsets of the "]" closing open links
        self._break_scan = (-1, 0, 0)  # a thematic break's scan so far: (start, at, count)
        self._item_line = False  # the current line is a heading or a list item
        self._line_tail = ""  # its last two non-blank output characters

    def feed(self, text: str) -> list[Segment]:
        """Add raw text; return the output it made decidable."""
        self._buf += text
        return self._run()

    def flush(self) -> list[Segment]:
        """End the stream: return the rest of the output and reset."""
        self._final = True
        out = self._run()
        self._reset()
        return out

    # -- driver -------------------------------------------------------------------

    def _run(self) -> list[Segment]:
        # Each step either raises _NeedMore before changing any state or completes.
        try:
            while self._pos < len(self._buf):
                self._step()
        except _NeedMore:
            pass
        self._close_run()
        out, self._out = self._out, []
        self._base += self._pos
        self._buf = self._buf[self._pos :]
        self._pos = 0
        return out

    def _peek(self, i: int) -> str:
        """``_buf[i]``; ``""`` past the end of the stream; _NeedMore if not yet known."""
        if i < len(self._buf):
            return self._buf[i]
        if self._final:
            return ""
        raise _NeedMore

    def _run_len(self, i: int, ch: str) -> int:
        """Length of the run of ``ch`` starting at ``i`` (needs the character after it)."""
        j = i
        while self._peek(j) == ch:
            j += 1
        return j - i

    def _emit(self, i: int, j: int) -> None:
        """Copy ``_buf[i:j]`` to the output verbatim and consume up to ``j``."""
        code = self._mode is _Mode.CODE
        if self._run_to != i or code != self._run_code:
            self._close_run()
            self._run_from, self._run_code = i, code
        self._run_to = self._pos = j
        self._prev = self._buf[j - 1]
        # The last two non-blank characters, whatever the runs' split: blanks between
        # them are skipped here as they are between two runs.
        tail, k = "", j
        while k > i and len(tail) < 2:
            k -= 1
            if self._buf[k] not in " \t\r\n":
                tail = self._buf[k] + tail
        if tail:
            self._line_tail = (self._line_tail + tail)[-2:]

    def _close_run(self) -> None:
        if self._run_from >= 0:
            a, b = self._run_from, self._run_to
            seg = Segment(self._buf[a:b], self._base + a, self._base + b, self._run_code)
            self._out.append(seg)
        self._run_from = self._run_to = -1

    def _drop(self, n: int) -> None:
        """Consume ``n`` characters of markup without output."""
        self._pos += n
        self._prev = self._buf[self._pos - 1]

    # -- steps ----------------------------------------------------------------------

    def _step(self) -> None:
        if self._mode is _Mode.FENCE:
            self._step_fence()
        elif self._mode is _Mode.URL:
            self._step_url()
        elif self._link_close and self._base + self._pos == self._link_close[-1]:
            # The "](" of a link recognised at its "[": drop it and skip the URL.
            self._link_close.pop()
            self._drop(2)
            self._mode, self._url_depth = _Mode.URL, 1
        elif self._mode is _Mode.CODE:
            self._step_code()
        elif not (self._line_start and self._step_line_start()):
            self._step_inline()

    def _step_line_start(self) -> bool:
        """Handle a line-start marker at ``_pos``; False when there is none."""
        p, c = self._pos, self._buf[self._pos]
        if c in _BLANK:
            self._emit(p, p + 1)  # indentation: still at the line start
            return True
        if c == "#":
            r = self._run_len(p, "#")
            if r <= 6 and self._peek(p + r) in _BLANK:
                self._drop(r + 1)
                self._item_line = True
            else:
                self._emit(p, p + r)  # "#hashtag", "#1", 7+ hashes
            self._line_start = False
            return True
        if c == ">" and self._peek(p + 1) in _BLANK:
            self._drop(2)  # a quote may hold a bullet or a heading: stay at line start
            return True
        if c in "-*_":
            end = self._thematic_break_end(p, c)
            if end is not None:
                self._drop(end - p)
                self._line_start = False
                return True
        if c in "-*+" and self._peek(p + 1) in _BLANK:
            self._drop(2)
            self._line_start = False
            self._item_line = True
            return True
        if c in "`~":
            r = self._run_len(p, c)
            end = self._fence_open_end(p, r) if r >= 3 else None
            if end is not None:
                self._open_fence(p, end, c, r)
                return True
        if c.isdigit():
            r = 0
            while r <= _LIST_NUMBER_MAX and "0" <= self._peek(p + r) <= "9":
                r += 1
            if r <= _LIST_NUMBER_MAX and self._peek(p + r) in (".", ")"):
                self._item_line = self._peek(p + r + 1) in (*_BLANK, "")
        self._line_start = False
        return False

    def _thematic_break_end(self, p: int, c: str) -> int | None:
        """End of a ``---`` / ``* * *`` line starting at ``p`` (before its newline).
        A line that may still be one is scanned on from where the last feed stopped
        (a hostile line of 100 KB of dashes would otherwise be rescanned per feed)."""
        start = self._base + p
        if self._break_scan[0] == start:
            q, count = self._break_scan[1] - self._base, self._break_scan[2]
        else:
            q, count = p, 0
        try:
            while (x := self._peek(q)) not in ("", "\n"):
                if x == c:
                    count += 1
                elif x not in _BLANK_CR:
                    return None
                q += 1
        except _NeedMore:
            self._break_scan = (start, self._base + q, count)
            raise
        return q if count >= 3 else None

    def _fence_open_end(self, p: int, r: int) -> int | None:
        """End of the opening fence line at ``p`` (after its newline), or None."""
        fence_char, q = self._buf[p], p + r
        limit = q + _FENCE_INFO_MAX
        while q < limit:
            x = self._peek(q)
            if x == "":
                return q
            if x == "\n":
                return q + 1
            if fence_char == "`" and x == "`":
                return None  # "```code```" on one line is inline code, not a fence
            q += 1
        return q

    def _open_fence(self, p: int, end: int, char: str, length: int) -> None:
        if self._code_block_text is not None:
            self._close_run()
            self._out.append(Segment(self._code_block_text, self._base + p, self._base + end))
        self._drop(end - p)
        self._mode = _Mode.FENCE
        self._fence_char, self._fence_len = char, length
        self._fence_line_start = self._buf[end - 1] == "\n"
        self._line_start = False

    def _step_fence(self) -> None:
        p = self._pos
        if self._fence_line_start:
            q = p
            while self._peek(q) in _BLANK:
                q += 1
            r = self._run_len(q, self._fence_char)
            if r >= self._fence_len:
                s = q + r
                while self._peek(s) in _BLANK_CR:
                    s += 1
                if self._peek(s) in ("", "\n"):
                    # The closing fence; its newline is ordinary text again.
                    self._drop(s - p)
                    self._mode = _Mode.TEXT
                    return
            self._fence_line_start = False
            return
        nl = self._buf.find("\n", p)
        if nl < 0:
            self._drop(len(self._buf) - p)
        else:
            self._drop(nl + 1 - p)
            self._fence_line_start = True

    def _step_url(self) -> None:
        c = self._buf[self._pos]
        if c == "\n":
            self._mode = _Mode.TEXT  # unterminated URL: the newline is text again
            return
        if c == "\\":
            self._drop(2 if self._peek(self._pos + 1) else 1)
            return
        if c == "(":
            self._url_depth += 1
        elif c == ")":
            self._url_depth -= 1
            if self._url_depth == 0:
                self._mode = _Mode.TEXT
        self._drop(1)

    def _step_code(self) -> None:
        p, c = self._pos, self._buf[self._pos]
        if c == "\n":
            self._mode = _Mode.TEXT  # code spans end at a line end
            return
        if c == "`":
            r = self._run_len(p, "`")
            if r == self._tick_len:
                self._drop(r)
                self._mode = _Mode.TEXT
            else:
                self._emit(p, p + r)
            return
        stop = self._run_stop()
        q = p + 1
        while q < stop and self._buf[q] not in "`\n":
            q += 1
        self._emit(p, q)

    def _run_stop(self) -> int:
        """Where a run of plain characters must stop: at a pending link's "]"."""
        if self._link_close:
            return self._link_close[-1] - self._base
        return len(self._buf)

    def _step_inline(self) -> None:
        p, c = self._pos, self._buf[self._pos]
        if c == "\n":
            self._end_item(p)
            self._emit(p, p + 1)
            self._line_start = True
        elif c == "\\":
            if self._peek(p + 1) in _PUNCT:
                self._drop(1)
                self._emit(p + 1, p + 2)
            else:
                self._emit(p, p + 1)
        elif c == "`":
            r = self._run_len(p, "`")
            self._drop(r)
            self._mode, self._tick_len = _Mode.CODE, r
        elif c in "*_~":
            self._step_emphasis(p, c)
        elif c == "!" or c == "[":
            bracket = p + 1 if c == "!" else p
            close = None
            if c == "[" or self._peek(bracket) == "[":
                close = self._link_close_at(bracket)
            if close is None:
                self._emit(p, p + 1)
            else:
                self._drop(bracket + 1 - p)
                self._link_close.append(self._base + close)
        else:
            stop, q = self._run_stop(), p + 1
            while q < stop and self._buf[q] not in _SPECIAL:
                q += 1
            self._emit(p, q)

    def _end_item(self, p: int) -> None:
        """At the newline ``p`` ending a line: end a heading or list item with a "."."""
        tail = self._line_tail
        if self._item_line and tail:
            ended = tail[-1] in _ITEM_ENDS or (
                tail[-1] in _ITEM_CLOSERS and len(tail) == 2 and tail[0] in _ITEM_ENDS
            )
            if not ended:
                self._close_run()
                self._out.append(Segment(".", self._base + p, self._base + p))
        self._item_line = False
        self._line_tail = ""

    def _step_emphasis(self, p: int, c: str) -> None:
        r = self._run_len(p, c)
        prev, nxt = self._prev, self._peek(p + r)
        flanking = not ((prev == "" or prev.isspace()) and (nxt == "" or nxt.isspace()))
        if c == "~":
            remove = r == 2 and flanking
        elif c == "*":
            remove = r <= 3 and flanking and not (prev.isdigit() and nxt.isdigit())
        else:
            remove = r <= 3 and flanking and not (prev.isalnum() and nxt.isalnum())
        if remove:
            self._drop(r)
        else:
            self._emit(p, p + r)

    def _link_close_at(self, p: int) -> int | None:
        """Index of the "]" closing the "[" at ``p`` if a "(" follows it, else None."""
        q, depth = p + 1, 1
        while q - p < _LINK_MAX:
            x = self._peek(q)
            if x in ("", "\n"):
                return None
            if x == "\\":
                q += 2  # an escaped bracket does not count
                continue
            if x == "[":
                depth += 1
            elif x == "]":
                depth -= 1
                if depth == 0:
                    return q if self._peek(q + 1) == "(" else None
            q += 1
        return None

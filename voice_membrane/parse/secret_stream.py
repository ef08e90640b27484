"""``SecretStream``: secrets masked in text that arrives in pieces.

A key comes over many tokens, so a stream cannot mask piece by piece. This one
passes text on at once unless it may be the start of a secret (a known value,
or a shape of ``infra/secret_shapes.py``) that the text so far does not decide;
it holds only that tail — at most ``SecretPattern.window`` characters, or what
is left of a word after ``Bearer`` — and a match that reaches the end of the
text is replaced at once, the rest of it dropped as it comes. Whatever the
splitting, what comes out is ``pattern.sub(text, replacement)`` of the whole.
"""

from __future__ import annotations

import re

from ..infra.invisible import has_invisible, without_invisible
from ..infra.secret_shapes import CONTEXT, SecretPattern

__all__ = ["SecretStream"]


class SecretStream:
    """``context``: the text before this one (a look-behind reads it); ``growing``:
    a match replaced just before this text may still grow through these."""

    def __init__(
        self,
        pattern: SecretPattern,
        replacement: str,
        *,
        context: str = "",
        growing: re.Pattern[str] | None = None,
    ) -> None:
        self.pattern, self.replacement = pattern, replacement
        self.masked = 0  # how many secrets were replaced
        self._context = without_invisible(context)[-CONTEXT:]  # before ``_held``
        self._held = ""
        self._growing = growing  # a replaced match may still grow

    def take_held(self) -> tuple[str, str, re.Pattern[str] | None]:
        """End the stream without deciding what it holds: the text held, the
        visible characters before it, and what a replaced match at its end may
        still grow through (another stream goes on from them)."""
        held, context, growing = self._held, self._context, self._growing
        self._held = self._context = ""
        self._growing = None
        return held, context, growing

    def feed(self, text: str) -> str:
        if self._growing is not None:
            grown = self._growing.match(text)
            n = grown.end() if grown is not None else 0
            if n:
                self._context = without_invisible(self._context + text[:n])[-CONTEXT:]
            if n == len(text):
                return ""
            text, self._growing = text[n:], None
        elif not self._held:  # (prose, mostly: nothing can begin a key in it)
            context = self._context
            s = context + text
            if self.pattern.quiet(s, len(context)):  # (so it holds no invisible one)
                self._context = s[-CONTEXT:]
                return text
        return self._scan(text, final=False)

    def flush(self) -> str:
        """The end of the text: what is held is decided."""
        out = self._scan("", final=True)
        self._context, self._growing = "", None
        return out

    def _scan(self, text: str, *, final: bool) -> str:
        pattern = self.pattern
        s = self._context + self._held + text
        pos = len(self._context)
        end = len(s)
        undecided = end if final else pattern.undecided(s, pos)
        found = pattern.search(s, pos)
        if found is None or found.start() >= undecided:  # the common case: nothing found
            self._hold(s, undecided)
            return s[pos:undecided]
        out: list[str] = []
        while (found := pattern.search(s, pos)) is not None and found.start() < undecided:
            out += (s[pos : found.start()], self.replacement)
            self.masked += 1
            pos = found.end()
            if pos == end and not final:
                self._growing = pattern.swallow(found)
                undecided = end
                break
            if pos > undecided:
                undecided = pattern.undecided(s, pos)
        out.append(s[pos:undecided])
        self._hold(s, undecided)
        return "".join(out)

    def _hold(self, s: str, undecided: int) -> None:
        """Keep what is undecided, and the visible characters before it (the
        context a look-behind reads: invisible ones are not part of a match).
        Held text is bounded in visible characters; a run of invisible ones in
        it is dropped once it holds more than that (nothing shows the loss)."""
        held = s[undecided:]
        if len(held) > 2 * self.pattern.window:
            held = without_invisible(held)
        self._held = held
        context = s[max(0, undecided - CONTEXT) : undecided]
        if not context.isascii() and has_invisible(context):
            context = without_invisible(s[:undecided])[-CONTEXT:]
        self._context = context

"""The last filter of the speech text: banned phrases never reach the voice.

``PhraseFilter`` reads ``Segment``\\ s after every other rewriting (markdown,
tables, URLs, symbols), so it judges the very text the TTS engine is given:
``**secret** plan``, ``[secret](http://x) plan`` and ``secret🎉plan`` all reach
it as ``secret plan``. It matches on the skeleton of that text
(``skeleton.py``) and cuts the raw span a match covers.

It holds back only the end of the text that a phrase could still be forming
in, so text that cannot begin a phrase passes at once (the first piece keeps
its head start); the output does not depend on how the input was split. It
remembers the skeleton of the end of what it let pass, even across ``flush``
(the end of a text block, before a tool call): a phrase whose start was
already said is cut from where the text resumes, so it is never said whole.
Past ``HOLD_MAX`` characters held (a hostile run of invisible characters
inside a phrase) it lets the held text go and relies on that memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .held import HeldText
from .markdown import Segment
from .phrase_guard import PhraseGuard
from .skeleton import GAP, GAPS, JOIN, Skeleton

HOLD_MAX = 1024
_SLICE = 256
# Where a sentence ends, for dropping the rest of one: terminal punctuation
# before whitespace (``3.5`` goes on), a CJK one, or a line break.
_CLOSERS = "\"'\u201d\u2019\u00bb)\\]"  # quotes and brackets a sentence end may close
_END = re.compile(rf"[.!?…]+[{_CLOSERS}]*(?=\s)|[\u3002\uff01\uff1f]+|\n")
_END_MAY_FOLLOW = re.compile(rf"[.!?…]+[{_CLOSERS}]*$")


class PhraseFilter:
    """``Segment``\\ s in, the same with every banned phrase cut; ``flush`` ends
    the stream (a text block) and resets all but the memory of what was said."""

    def __init__(self, guard: PhraseGuard) -> None:
        self._guard = guard
        self._said = GAP  # the skeleton of the end of what passed: a phrase may begin in it
        self._reset()

    def _reset(self) -> None:
        self._held = HeldText()
        self._skel = Skeleton()  # of the undecided text
        self._base = 0  # the skeleton's raw offset of _held.text[0]
        self._skipping = False  # dropping the rest of a sentence that held a phrase

    def feed(self, segments: Iterable[Segment]) -> list[Segment]:
        held = self._held
        held.add(segments)
        # A slice at a time, so a whole reply fed at once costs linear time too
        # (each cut rescans only what is held).
        while (judged := self._judged()) < len(held.text):
            self._skel.add(held.text[judged : judged + _SLICE])
            self._decide(final=False)
        if len(held.text) - held.pos > HOLD_MAX:
            self._decide(final=True)
        return self._take_out()

    def flush(self) -> list[Segment]:
        self._decide(final=True)
        out = self._held.take_out()
        self._reset()
        self._remember(GAP)  # the next block is spoken apart: a word break
        return out

    def lookahead(self, following: str) -> str:
        """``following`` (the letters that begin the text held before this
        filter) if they are sure to pass as they are, else ""."""
        if not following or self._skipping or len(self._held.text) > self._held.pos:
            return ""
        probe = Skeleton()
        probe.add(following)
        text = _joined(self._said, probe.text)
        if self._guard.forming(text, len(text)) < len(text):
            return ""
        return following

    # ------------------------------------------------------------------ deciding

    def _decide(self, *, final: bool) -> None:
        guard, held, skel = self._guard, self._held, self._skel
        while True:
            if self._skipping:
                if not self._skip(final):
                    return
                continue
            text = _joined(self._said, skel.text)
            said = len(text) - len(skel.text)  # where the undecided text begins in it
            found = guard.find(text, said)
            if found is not None and (final or found[1] < len(text)):
                cut = self._raw(found[0], said)
                keep = self._raw(self._carry(text, found[0]), said)
                size = self._raw_end(found[1], said) - cut
                self._pass(keep)
                held.drop(cut - keep)  # words that could join the text after the cut
                if guard.replacement:
                    if size > 0:
                        held.replace(size, guard.replacement)
                    else:
                        held.insert(guard.replacement)
                    self._remember(guard.replacement_skeleton)
                else:
                    held.drop(size)
                skel.take(held.pos + self._base)
                self._skipping = True
                continue
            hold = len(text) if final else guard.forming(text, len(text))
            if found is not None:  # at the very end: the next character may extend the word
                hold = min(hold, found[0])
            if hold < len(text):
                hold = self._carry(text, hold)
            self._pass(self._raw(hold, said))
            return

    def _carry(self, text: str, start: int) -> int:
        """Where the held text must begin when a phrase may be cut at ``start``:
        with nothing said in its place, the words before it meet the words after
        its sentence, so what could begin a phrase before it waits (and goes with it)."""
        if not self._guard.joins:
            return start
        while (earlier := self._guard.forming(text, start)) < start:
            start = earlier
        return start

    def _skip(self, final: bool) -> bool:
        """Drop the rest of the sentence; True once its end is passed."""
        held, judged = self._held, self._judged()
        end = _END.search(held.text, held.pos, judged)
        if end is None:
            stop = judged
            if not final and (last := _END_MAY_FOLLOW.search(held.text, held.pos, judged)):
                stop = last.start()  # a "." that may end the sentence: see what follows
            held.drop(stop - held.pos)
            self._skel.take(held.pos + self._base)
            return False
        held.drop((end.start() if end.group() == "\n" else end.end()) - held.pos)
        self._skel.take(held.pos + self._base)
        self._skipping = False
        return True

    # ------------------------------------------------------------------ positions

    def _raw(self, index: int, said: int) -> int:
        """Where in the held text the skeleton character ``index`` of the joined
        text begins (one in what was said: where the undecided text begins)."""
        skel = self._skel
        if index < said:
            return self._held.pos
        if index - said < len(skel.starts):
            return skel.starts[index - said] - self._base
        return self._judged()

    def _raw_end(self, index: int, said: int) -> int:
        """Where in the held text the skeleton character ``index - 1`` ends."""
        if index <= said:
            return self._held.pos
        return self._skel.ends[index - said - 1] - self._base

    def _judged(self) -> int:
        """Where in the held text the text not yet read into the skeleton begins."""
        return self._skel.raw_len - self._base

    def _pass(self, raw: int) -> None:
        held = self._held
        if raw > held.pos:
            held.keep(raw - held.pos)
            self._remember(self._skel.take(raw + self._base))

    def _remember(self, text: str) -> None:
        said = _joined(self._said, text)
        self._said = said[-self._guard.reach :]

    def _take_out(self) -> list[Segment]:
        self._base += self._held.pos  # (take_out drops the decided text)
        return self._held.take_out()


def _joined(before: str, after: str) -> str:
    """Two skeletons one after the other, a gap between them collapsed."""
    if before and after and before[-1] in GAPS and after[0] in GAPS:
        gap = GAP if GAP in (before[-1], after[0]) else JOIN
        return before[:-1] + gap + after[1:]
    return before + after

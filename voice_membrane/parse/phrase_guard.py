"""A stream policy that keeps banned phrases from the voice.

``PhraseGuard`` sits before the chunker, so not even the chunker's early first
piece can let a phrase out, and it holds back only as much visible text as a
phrase could still be forming in: text that cannot be the start of a banned
phrase passes at once. Matching ignores case and treats any run of whitespace
as one space, and a phrase that starts or ends with a letter or digit matches
whole words only (``ass`` is not found in ``class``). A phrase split across
tokens, chunks or pieces is found all the same.

Found, the phrase and the rest of its sentence are replaced by ``replacement``
(``action="replace"``) or dropped (``action="drop"``); what of the sentence came
before the phrase has already gone on (holding every sentence until its end
would cost the first piece its head start). The text block's content, as the
history keeps it, is what passed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from ..vocab.events import BlockComplete, Chunk, ChunkMeta, Event
from .policy import PolicyContext, StreamState, rewrite_content

_SENTENCE_END = re.compile(r"[.!?…\u3002\uff01\uff1f]+(\s|$)")  # full-width ones too
_WHITESPACE = re.compile(r"\s+")


def _normal(text: str) -> str:
    return _WHITESPACE.sub(" ", text.lower())


class PhraseGuard:
    def __init__(
        self,
        phrases: Iterable[str],
        *,
        action: Literal["replace", "drop"] = "replace",
        replacement: str = "",
    ) -> None:
        self.phrases = [p for p in (_normal(p).strip() for p in phrases) if p]
        if not self.phrases:
            raise ValueError("PhraseGuard needs at least one phrase")
        if action not in ("replace", "drop"):
            raise ValueError(f"action must be 'replace' or 'drop', not {action!r}")
        self.action, self.replacement = action, replacement
        self._pattern = re.compile(
            "|".join(_phrase_pattern(p) for p in self.phrases), re.IGNORECASE
        )
        self._longest = max(len(p) for p in self.phrases)
        self._held = ""  # visible text not yet passed on: a phrase may be forming in it
        self._meta: ChunkMeta | None = None
        self._skipping = False  # dropping the rest of a sentence that held a phrase
        # With nothing said in its place, the words before a dropped phrase meet the
        # words after its sentence: the end that could begin a phrase waits to be
        # scanned with them (``secret [damn.] plan`` must not say ``secret plan``).
        self._carry = ""
        self._passed: list[str] = []  # what of the current text block went on

    def on_chunk(self, event: Event, state: StreamState, context: PolicyContext) -> None:
        if isinstance(event, Chunk) and event.meta.visible:
            if self._meta is not None and self._meta.block_index != event.meta.block_index:
                self._end_block(context)  # (a block that never completed)
            self._meta = event.meta
            context.drop()
            self._pass(self._scan(event.text, final=False), context)
        elif (
            isinstance(event, BlockComplete)
            and self._meta is not None
            and event.index == self._meta.block_index
        ):
            self._end_block(context)
            context.send(rewrite_content(event, "".join(self._passed)))
            self._passed = []

    def _end_block(self, context: PolicyContext) -> None:
        self._pass(self._scan("", final=True), context)
        self._meta, self._skipping, self._carry = None, False, ""

    def _pass(self, text: str, context: PolicyContext) -> None:
        if text and self._meta is not None:
            self._passed.append(text)
            context.send(Chunk(text, self._meta))

    def _scan(self, text: str, *, final: bool) -> str:
        """What of the held text and ``text`` may pass now; the rest stays held."""
        buf = self._held + text
        out: list[str] = []
        while True:
            if self._skipping:
                end = _SENTENCE_END.search(buf)
                if end is None or (not final and end.end() == len(buf) and not end.group(1)):
                    # No sentence end yet (or a '.' that may be a decimal point): the
                    # rest is dropped, a last terminator kept to see what follows it.
                    buf = "" if final or end is None else buf[end.start() :]
                    if final:
                        out.append(self._carry)
                        self._carry = ""
                    break
                self._skipping = False
                buf = self._carry + buf[end.end() - len(end.group(1)) :]  # the space stays
                self._carry = ""
                continue
            found = self._pattern.search(buf)
            if found is not None and (found.end() < len(buf) or final):
                before = buf[: found.start()]
                said = self.replacement if self.action == "replace" else ""
                keep = 0 if said else self._forming(before)
                out.append(before[: len(before) - keep])
                self._carry = before[len(before) - keep :]
                out.append(said)
                self._skipping = True
                buf = buf[found.end() :]
                continue
            if found is not None:  # at the very end: the next character may extend the word
                start = self._joined(buf, found.start())
                out.append(buf[:start])
                buf = buf[start:]
                break
            start = len(buf) if final else self._joined(buf, len(buf) - self._forming(buf))
            out.append(buf[:start])
            buf = buf[start:]
            break
        self._held = buf
        return "".join(out)

    def _forming(self, buf: str) -> int:
        """The length of the longest end of ``buf`` that a phrase may begin in."""
        keep = 0
        start = len(buf)
        while start > 0:
            start -= 1
            tail = _normal(buf[start:])
            if len(tail) > self._longest:
                break
            if any(p.startswith(tail) for p in self.phrases) and self._boundary(buf, start):
                keep = len(buf) - start
        return keep

    def _joined(self, buf: str, start: int) -> int:
        """Where the held text begins when ``buf[start:]`` may be a phrase: with
        nothing said in place of a phrase, the words before it may join the words
        after its sentence, so what could begin a phrase before it waits too."""
        if start == len(buf) or (self.action == "replace" and self.replacement):
            return start
        while (keep := self._forming(buf[:start])) > 0:
            start -= keep
        return start

    @staticmethod
    def _boundary(buf: str, start: int) -> bool:
        return start == 0 or not (buf[start].isalnum() and buf[start - 1].isalnum())


def _phrase_pattern(phrase: str) -> str:
    body = r"\s+".join(re.escape(word) for word in phrase.split(" "))
    head = r"(?<!\w)" if phrase[0].isalnum() else ""
    tail = r"(?!\w)" if phrase[-1].isalnum() else ""
    return head + body + tail

"""``SecretFilter``: no key in a reply's events, whatever splits it.

Sans-I/O over events (``feed(events) -> events``, ``flush()``), run on every
reply by ``ReplyReader`` before the stream policies, so nothing after it — the
speech, the log, the history, a client — sees a secret. Each block's text goes
through a ``SecretStream`` (the parts of a tool call each through their own; a
call's name and id are left alone): text that may still become a key is held
(a bounded tail), and a key found is replaced

- in visible text by ``spoken`` ("a key"): that is what is shown, spoken, heard
  and kept in the history, so all of them agree;
- in hidden text (thinking, tool calls and results) by ``hidden`` (``***``).

A block in which something was masked completes with its content masked the
same way (its chunks joined), except a signed thinking block: its text goes
back to the model as signed, so it keeps it, and ``redact`` masks it wherever
it leaves the process. A tool call's ``input`` is masked too (``***``): a key
is never handed to a tool — an MCP server may be another machine — and the
call goes back to the model as it ran.

A key split by hidden blocks (``sk-proj-Ab<thinking>…</thinking>Cd…``: text
blocks, each short of a key, read and heard as one) is seen too: a text block
that ends where a key may begin keeps that end (``_Carried``) and holds the
events after it until the text blocks that follow say whether it begins a key.
If it does, "a key" ends the block it began in and the rest of the key never
comes; the blocks complete with what was shown. The end of a provider call
decides what is carried (``flush``): a tool round never waits on it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any, Final

from ..infra.invisible import without_invisible
from ..infra.redact import MASK, secret_pattern
from ..infra.secret_shapes import CONTEXT, SecretPattern
from ..vocab.events import Block, BlockComplete, BlockStart, Chunk, ChunkMeta, Event
from .secret_stream import SecretStream

__all__ = ["SPOKEN", "SecretFilter"]

SPOKEN: Final = "a key"  # what is said (and shown) where visible text held a key


@dataclass
class _Part:
    """Visible text of one block, in a carry."""

    meta: ChunkMeta
    text: str


@dataclass
class _Carried:
    """A text block's end that may begin a key, carried over what follows it:
    the visible text since, in parts (``parts[0]``: that end), and the other
    events, held in order (an int: where that part's text goes)."""

    context: str  # the visible characters before it
    parts: list[_Part]
    deferred: list[Event | int] = field(default_factory=lambda: [0])


class SecretFilter:
    def __init__(
        self, pattern: SecretPattern | None = None, *, spoken: str = SPOKEN, hidden: str = MASK
    ) -> None:
        # The known keys as they are when the reply starts.
        self.pattern = pattern if pattern is not None else secret_pattern()
        self.spoken, self.hidden = spoken, hidden
        self._meta: ChunkMeta | None = None  # of the text the stream holds
        self._stream: SecretStream | None = None
        self._masked: set[int] = set()  # blocks in which something was masked
        self._carried: _Carried | None = None
        self._shown: dict[int, list[str]] = {}  # a text block's chunks, as they went
        self._rejoined: set[int] = set()  # text blocks that complete with their chunks
        # The last text block ended in a masked key that may go on: its context,
        # and what the key may grow through.
        self._grows: tuple[str, re.Pattern[str]] | None = None

    def feed(self, events: list[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            carried = self._carried
            if carried is None:
                self._one(event, out)
            elif isinstance(event, Chunk) and event.meta.visible:
                last = carried.parts[-1]
                if event.meta == last.meta and carried.deferred[-1] == len(carried.parts) - 1:
                    last.text += event.text
                else:  # the next text block (or this one again, after hidden text)
                    carried.deferred.append(len(carried.parts))
                    carried.parts.append(_Part(event.meta, event.text))
                self._decide(out, final=False)
            else:
                self._one(event, carried.deferred)
        return out

    def flush(self) -> list[Event]:
        """The end of the reply: text still held (a block that never completed)."""
        out: list[Event] = []
        if self._carried is not None:
            self._decide(out, final=True)
        self._end(out, carry=False)
        self._grows = None
        return out

    def _one(self, event: Event, out: list[Any]) -> None:
        # (``out``: the events let through, or a carry's deferred ones)
        if isinstance(event, Chunk):
            meta = event.meta
            if meta is not self._meta and meta != self._meta:
                self._end(out, carry=not meta.visible)
                if self._carried is not None:  # (a hidden block after a key's start)
                    out = self._carried.deferred
                if meta.tool_call_part in ("name", "id"):
                    out.append(event)
                    return
                self._meta = meta
                replacement = self.spoken if meta.visible else self.hidden
                self._stream = SecretStream(self.pattern, replacement)
                if meta.visible and self._grows is not None:
                    context, growing = self._grows
                    self._stream = SecretStream(
                        self.pattern, replacement, context=context, growing=growing
                    )
                    self._rejoined.add(meta.block_index)  # (if it did, it ends shorter)
                if meta.visible:
                    self._grows = None
            assert self._stream is not None
            text = self._stream.feed(event.text)
            if text == event.text:
                if meta.visible:
                    self._said(event)
                out.append(event)
            elif text:
                self._said(Chunk(text, meta))
                out.append(Chunk(text, meta))
        elif isinstance(event, BlockComplete):
            self._end(out, carry=True)
            if self._carried is not None:  # completed once the carried end is decided
                self._carried.deferred.append(event)
            else:
                out.append(self._completed(event))
        else:
            if isinstance(event, BlockStart):
                self._end(out, carry=True)
            (out if self._carried is None else self._carried.deferred).append(event)

    def _said(self, chunk: Chunk) -> None:
        if chunk.meta.visible:
            self._shown.setdefault(chunk.meta.block_index, []).append(chunk.text)

    def _completed(self, event: BlockComplete) -> BlockComplete:
        shown = self._shown.pop(event.index, [])
        if event.index in self._rejoined:  # (a block all of whose text was a key's: "")
            self._rejoined.discard(event.index)
            self._masked.discard(event.index)
            event = BlockComplete(event.index, replace(event.block, content="".join(shown)))
        if event.index in self._masked:
            self._masked.discard(event.index)
            event = BlockComplete(event.index, self._masked_block(event.block))
        if event.block.input:  # (whatever its chunks held: native input is JSON)
            masked = self._masked_input(event.block.input)
            if masked != event.block.input:
                event = BlockComplete(event.index, replace(event.block, input=masked))
        return event

    def _end(self, out: list[Any], *, carry: bool) -> None:
        """The stream's text ends. ``carry``: a text block's end that may begin
        a key is carried over what follows, to the next text block."""
        stream, meta = self._stream, self._meta
        if stream is None or meta is None:
            return
        self._stream = self._meta = None
        if stream.masked:
            self._masked.add(meta.block_index)
        if carry and meta.visible:
            held, context, growing = stream.take_held()
            if held:
                self._carried = _Carried(context, [_Part(meta, held)])
                return
            # A key masked at the block's very end: the next text block may go on with it.
            self._grows = (context, growing) if growing is not None else None
        tail = stream.flush()
        if tail:
            self._said(Chunk(tail, meta))
            out.append(Chunk(tail, meta))

    def _decide(self, out: list[Event], *, final: bool) -> None:
        """Whether the carried end, with the visible text since, begins a key
        (``final``: what came is all there is). Once it is known, what is
        decided goes on — a key's replacement in the part it begins in, none of
        its characters — and what is not yet (a key's start further on) is
        carried again, or held by its block's stream."""
        c = self._carried
        assert c is not None
        pattern = self.pattern
        s = c.context + "".join(part.text for part in c.parts)
        start = len(c.context)
        bounds = list(accumulate((len(part.text) for part in c.parts), initial=start))[1:]
        undecided = len(s) if final else pattern.undecided(s, start)
        found = pattern.search(s, start)
        if undecided < bounds[0] and (found is None or found.start() >= undecided):
            return  # not yet known
        outs: list[list[str]] = [[] for _ in c.parts]
        pos, growing, masked = start, None, False
        while (found := pattern.search(s, pos)) is not None and found.start() < undecided:
            _give(outs, bounds, s, pos, found.start())
            outs[bisect_right(bounds, found.start())].append(self.spoken)
            masked, pos = True, found.end()
            if pos == len(s) and not final:
                growing, undecided = pattern.swallow(found), len(s)
                break
            if pos > undecided:
                undecided = pattern.undecided(s, pos)
        _give(outs, bounds, s, pos, undecided)
        k = min(bisect_right(bounds, undecided), len(c.parts) - 1)  # where the rest begins
        if masked:
            self._rejoined.update(part.meta.block_index for part in c.parts)
        self._carried = None
        at = c.deferred.index(k)
        for item in c.deferred[: at + 1]:
            if isinstance(item, int):
                text = "".join(outs[item])
                if text:
                    chunk = Chunk(text, c.parts[item].meta)
                    self._said(chunk)
                    out.append(chunk)
            else:
                out.append(self._completed(item) if isinstance(item, BlockComplete) else item)
        rest, after = s[undecided : bounds[k]], c.deferred[at + 1 :]
        parts = [_Part(c.parts[k].meta, rest), *c.parts[k + 1 :]]
        if rest and (after or len(parts) > 1):  # a key's start further on: carried again
            context = without_invisible(s[:undecided])[-CONTEXT:]
            deferred = [0, *(i - k if isinstance(i, int) else i for i in after)]
            self._carried = _Carried(context, parts, deferred)
            return
        for item in after:  # (only events: a part after k would have text, so k is last)
            if not isinstance(item, int):
                out.append(self._completed(item) if isinstance(item, BlockComplete) else item)
        self._end(out, carry=False)  # (a hidden block's text still open: it ends here)
        meta = c.parts[k].meta
        if not after:  # its block goes on: its stream holds the rest
            self._stream = SecretStream(
                pattern, self.spoken, context=s[:undecided], growing=growing
            )
            self._meta = meta
            if masked:
                self._stream.masked += 1
            text = self._stream.feed(rest)
            if text:
                self._said(Chunk(text, meta))
                out.append(Chunk(text, meta))

    def _masked_input(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.pattern.sub(value, self.hidden)
        if isinstance(value, dict):
            return {key: self._masked_input(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._masked_input(item) for item in value]
        return value

    def _masked_block(self, block: Block) -> Block:
        if block.content is None:
            return block
        if block.type == "thinking" and (block.signature or block.redacted_data):
            return block  # signed: sent back as written; masked where it leaves
        replacement = self.spoken if block.type == "text" else self.hidden
        return replace(block, content=self.pattern.sub(block.content, replacement))


def _give(outs: list[list[str]], bounds: list[int], s: str, a: int, b: int) -> None:
    """``s[a:b]`` to the parts it lies in (``bounds``: where each part ends)."""
    while a < b:
        i = bisect_right(bounds, a)
        end = min(b, bounds[i])
        outs[i].append(s[a:end])
        a = end

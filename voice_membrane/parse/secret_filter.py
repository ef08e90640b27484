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

A key split by a hidden block (``sk-proj-Ab<thinking>…</thinking>Cd…``: the
halves are two text blocks, each short of a key, read and heard as one) is
seen too: a text block that ends where a key may begin keeps that end
(``_Carried``) and holds the events after it until the next text block says
whether the two make a key. If they do, "a key" ends the first block and the
rest of the key never comes; both blocks complete with what was shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Final

from ..infra.redact import MASK, secret_pattern
from ..infra.secret_shapes import SecretPattern
from ..vocab.events import Block, BlockComplete, BlockStart, Chunk, ChunkMeta, Event
from .secret_stream import SecretStream

__all__ = ["SPOKEN", "SecretFilter"]

SPOKEN: Final = "a key"  # what is said (and shown) where visible text held a key


@dataclass
class _Carried:
    """A text block's end that may begin a key, carried over what follows it."""

    held: str  # the end, undecided
    context: str  # the visible characters before it
    meta: ChunkMeta  # its block's
    deferred: list[Event] = field(default_factory=list)  # the events since, in order
    joined: str = ""  # the next text block's text so far
    next_meta: ChunkMeta | None = None


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
                # (the next text block, or the same one going on after hidden text)
                if carried.next_meta not in (None, event.meta):
                    self._decide(out, final=True)  # a third text block: what came decides
                    self._one(event, out)
                    continue
                carried.next_meta = event.meta
                carried.joined += event.text
                self._decide(out, final=False)
            elif carried.joined:  # the next text block ended before deciding
                self._decide(out, final=True)
                self._one(event, out)
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

    def _one(self, event: Event, out: list[Event]) -> None:
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
        shown = self._shown.pop(event.index, None)
        if event.index in self._rejoined and shown is not None:
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

    def _end(self, out: list[Event], *, carry: bool) -> None:
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
                self._carried = _Carried(held, context, meta)
                return
            # A key masked at the block's very end: the next text block may go on with it.
            self._grows = (context, growing) if growing is not None else None
        tail = stream.flush()
        if tail:
            self._said(Chunk(tail, meta))
            out.append(Chunk(tail, meta))

    def _decide(self, out: list[Event], *, final: bool) -> None:
        """Whether the carried end and the next text block's text make a key
        (``final``: what came is all there is); if decided, the events go on."""
        c = self._carried
        assert c is not None
        pattern = self.pattern
        s = c.context + c.held + c.joined
        start = len(c.context)
        boundary = start + len(c.held)
        found = pattern.search(s, start)
        undecided = len(s) if final else pattern.undecided(s, start)
        spans = found is not None and found.start() < min(boundary, undecided)
        if not spans and undecided < boundary:
            return  # not yet known
        self._carried = None
        stream = None
        if found is not None and spans:  # a key across the hidden blocks
            end = found.end()
            first = s[start : found.start()] + self.spoken
            if end < boundary:
                first += pattern.sub(s[end:boundary], self.spoken)
                end = boundary
            self._rejoined.add(c.meta.block_index)
            growing = pattern.swallow(found) if end == len(s) and not final else None
            stream = SecretStream(pattern, self.spoken, context=s[:end], growing=growing)
            rest = s[end:]
        else:
            first, rest = s[start:boundary], c.joined
            stream = SecretStream(pattern, self.spoken, context=s[:boundary])
        if first:
            self._said(Chunk(first, c.meta))
            out.append(Chunk(first, c.meta))
        for event in c.deferred:
            out.append(self._completed(event) if isinstance(event, BlockComplete) else event)
        self._end(out, carry=False)  # (a hidden block's text still open: it ends here)
        if c.next_meta is None:
            return
        self._stream, self._meta = stream, c.next_meta
        if found is not None and spans:
            self._rejoined.add(c.next_meta.block_index)
            stream.masked += 1
        text = stream.feed(rest)
        if final:
            text += stream.flush()
            self._stream = self._meta = None
        if text:
            self._said(Chunk(text, c.next_meta))
            out.append(Chunk(text, c.next_meta))

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

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
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from ..infra.redact import MASK, secret_pattern
from ..infra.secret_shapes import SecretPattern
from ..vocab.events import Block, BlockComplete, BlockStart, Chunk, ChunkMeta, Event
from .secret_stream import SecretStream

__all__ = ["SPOKEN", "SecretFilter"]

SPOKEN: Final = "a key"  # what is said (and shown) where visible text held a key


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

    def feed(self, events: list[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if isinstance(event, Chunk):
                meta = event.meta
                if meta is not self._meta and meta != self._meta:
                    self._end(out)
                    if meta.tool_call_part in ("name", "id"):
                        out.append(event)
                        continue
                    self._meta = meta
                    replacement = self.spoken if meta.visible else self.hidden
                    self._stream = SecretStream(self.pattern, replacement)
                assert self._stream is not None
                text = self._stream.feed(event.text)
                if text == event.text:
                    out.append(event)
                elif text:
                    out.append(Chunk(text, meta))
            elif isinstance(event, BlockComplete):
                self._end(out)
                if event.index in self._masked:
                    self._masked.discard(event.index)
                    event = BlockComplete(event.index, self._masked_block(event.block))
                if event.block.input:  # (whatever its chunks held: native input is JSON)
                    masked = self._masked_input(event.block.input)
                    if masked != event.block.input:
                        event = BlockComplete(event.index, replace(event.block, input=masked))
                out.append(event)
            else:
                if isinstance(event, BlockStart):
                    self._end(out)
                out.append(event)
        return out

    def flush(self) -> list[Event]:
        """The end of the reply: text still held (a block that never completed)."""
        out: list[Event] = []
        self._end(out)
        return out

    def _end(self, out: list[Event]) -> None:
        stream, meta = self._stream, self._meta
        if stream is None or meta is None:
            return
        tail = stream.flush()
        if tail:
            out.append(Chunk(tail, meta))
        if stream.masked:
            self._masked.add(meta.block_index)
        self._stream = self._meta = None

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

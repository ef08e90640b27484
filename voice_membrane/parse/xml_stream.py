"""XmlStreamParser: sorts a prefill-mode text stream into logical blocks.

Feed it text as it streams; it returns events (``BlockStart``, ``Chunk``,
``BlockComplete``) in emission order. Tags are wire format and never reach a
chunk. A ``<…`` is held back only while it can still become a tag that matters
where it stands; the moment it cannot (``<b>``, ``a < b``, ``<3``,
``<thinkingly>``) it is emitted unchanged as content. Only top-level text is
visible.

The rules per context (see ``frames.STRUCTURAL``):

- top level: text (visible). ``<thinking>``, ``<function_calls>`` and
  ``<function_results>`` open containers; a bare ``<invoke>`` opens an implicit
  ``<function_calls>`` that closes with it (so a forgotten wrapper never makes a
  call's parameters speakable); any other known tag is dropped.
- thinking: opaque text up to ``</thinking>``.
- function calls: each ``<invoke name="…">`` is one ``tool_call`` block, with the
  name and a generated id as its first chunks and parameter values as ``input``
  chunks. Parameter values are opaque up to ``</parameter>`` (or ``</invoke>``,
  ``</function_calls>``, which also close what they enclose).
- function results: each ``<result|error tool_use_id="…">`` is one ``tool_result``
  block whose content is XML-unescaped. A result may nest a transcript's own
  ``<function_calls>`` / ``<function_results>``; ``meta.depth`` counts the nesting.
- whitespace between structural tags is wire format; other text there (malformed
  output) is kept as a hidden chunk with ``tool_call_part=None``.
- whitespace at top level that opens no block is layout, except where it is the
  only separator between two visible words (``ok.</function_calls>\n<thinking>…
  </thinking>Sure``): then it opens the next text block, so the visible text
  never joins two words.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Final

from ..vocab.events import Block, BlockComplete, BlockStart, Chunk, ChunkMeta, Event, ToolCallPart
from .entities import EntityDecoder
from .frames import (
    BLOCK_TYPE,
    CLOSES,
    DROPS_OTHER_TAGS,
    HELD_TAGS,
    STRUCTURAL,
    Frame,
    Kind,
    OpenBlock,
)
from .tags import MAX_TAG_LENGTH, TAG_PATTERN, TagKey, could_become_tag, tag_key
from .tool_input import parse_parameter_value

_log = logging.getLogger(__name__)
_search_tag: Final = TAG_PATTERN.search
# Where a parameter's value ends: the first closer that acts inside it (group 1 for
# </parameter>, 2 for an enclosing closer).
_search_param_end: Final = re.compile(
    r"</(?:antml:)?(?:(parameter)|(invoke|function_calls))\s*>"
).search
_PARAMETER: Final = (False, "parameter")
_STRAY_KINDS: Final = frozenset({Kind.CALLS, Kind.INVOKE, Kind.RESULTS})


class XmlStreamParser:
    """Incremental parser for prefill-mode output (Anthropic-style XML blocks).

    Args:
        prefill: text already in the assistant turn before the stream (for
            example an opened ``<thinking>``). It sets the parser's state without
            emitting anything, so a continuation is read in the right context.
        id_prefix: prefix of the generated tool-use ids (``{id_prefix}{n}``, n
            counting invokes from 1, prefill included); stable for a given stream.
    """

    def __init__(self, prefill: str = "", *, id_prefix: str = "toolu_xml_") -> None:
        self._id_prefix = id_prefix
        self._stack: list[Frame] = [Frame(Kind.ROOT, depth=0)]
        self._open: OpenBlock | None = None
        self._next_index = 0
        self._invokes = 0
        self._taken_ids: set[str] = set()
        self._tool_names: dict[str, str] = {}
        self._pending = ""  # a partial tag held back, always starting with "<"
        self._stray: list[str] = []  # text between structural tags, decided at the next tag
        self._entities = EntityDecoder()  # of result text
        self._lead_space: list[str] = []  # whitespace that may yet open a text block
        # The visible text so far ends inside a word: whitespace met before the next
        # text block separates two words, so it is kept for that block.
        self._separates = False
        self._param_end = 0  # set by _whole_parameter: where the scan goes on
        self._silent = False
        self._out: list[Event] = []
        self._accumulated: list[str] = []
        if prefill:
            self.push(prefill)

    # ------------------------------------------------------------------ public API

    def feed(self, text: str) -> list[Event]:
        """Parse the next piece of the stream; return the events it completes."""
        out: list[Event] = []
        self._out = out
        self._accumulated.append(text)
        self._scan(text)
        return out

    def push(self, text: str) -> None:
        """Take text into the parser's state without emitting it (a prefill, or
        wire text a harness injects). Tool calls opened here still complete in
        the stream with their full input."""
        self._silent = True
        try:
            self.feed(text)
            self._stray.clear()
            if not self._separates:
                self._lead_space.clear()
            self._entities.take_held()
        finally:
            self._silent = False
            self._out = []

    def flush(self) -> list[Event]:
        """End of stream: emit a held partial tag as content, complete every open
        block (hidden ones stay hidden) and return to the top level."""
        out: list[Event] = []
        self._out = out
        if self._pending:
            text, self._pending = self._pending, ""
            self._content(text)
        if self._stack[-1].kind is Kind.CALLS and self._stray:
            # Text left between invokes at the end (a cut `</function_ca`, `<invo`)
            # belongs to no invoke: it must never become a call.
            stray = "".join(self._stray)
            self._stray.clear()
            if stray.strip():
                _log.warning("stray text at the end of tool calls kept hidden: %.60r", stray)
        self._end_segment()
        self._lead_space.clear()
        while len(self._stack) > 1:
            self._finish(self._stack.pop())
        if self._open is not None:
            self._complete()
        return out

    @property
    def accumulated(self) -> str:
        """Everything fed or pushed so far, tags included."""
        return "".join(self._accumulated)

    @property
    def inside_hidden(self) -> bool:
        """True while the stream is inside thinking, a tool call or tool results
        (a stop sequence seen here is a false positive)."""
        return len(self._stack) > 1

    @property
    def next_block_index(self) -> int:
        """The index the next block will get."""
        return self._next_index

    def reserve_ids(self, ids: Iterable[str]) -> None:
        """Never generate these tool-use ids (calls already in the conversation), so
        a call's id stays unique across the turns of a session."""
        self._taken_ids.update(ids)

    def skip_to(self, index: int) -> None:
        """Number the next block at least ``index``: blocks that came from elsewhere
        in the same reply (native blocks beside prefill text) keep their indices."""
        self._next_index = max(self._next_index, index)

    # ------------------------------------------------------------------ scanning

    def _scan(self, text: str) -> None:
        if self._pending:
            buf = self._pending + text
            self._pending = ""
        elif "<" not in text:  # most tokens: nothing that could be a tag
            if text:
                self._content(text)
            return
        else:
            buf = text
        run = 0  # start of the content run not yet emitted
        pos = 0  # where the search for the next tag goes on
        search = _search_tag
        while (m := search(buf, pos)) is not None:
            lt, after = m.span()
            if after - lt > MAX_TAG_LENGTH + 1:
                # Longer than a tag may be: the "<" is plain content; scan on after it.
                pos = lt + 1
                continue
            kind = self._stack[-1].kind
            key, value = tag_key(m)
            acts = key in STRUCTURAL[kind]
            if not acts and kind not in DROPS_OTHER_TAGS:
                pos = after  # a known tag that means nothing here is content, as written
                continue
            if lt > run:
                text = buf[run:lt]
                # Layout between structural tags (`</invoke>\n<invoke …>`), with no
                # stray text before it, is settled by this tag: nothing to keep.
                if self._stray or kind not in _STRAY_KINDS or not text.isspace():
                    self._content(text)
            if self._stray or self._entities.held:
                self._end_segment()
            if acts:
                if key == _PARAMETER and self._whole_parameter(buf, after, value):
                    pos = run = self._param_end
                    continue
                self._on_tag(key, value)
            pos = run = after
        end = len(buf)
        # A "<" with no ">" after it, near the end, may still become a tag: hold it.
        lt = buf.find("<", max(pos, end - MAX_TAG_LENGTH, buf.rfind(">") + 1))
        if lt >= 0:
            held = HELD_TAGS[self._stack[-1].kind]
            while lt >= 0:
                if could_become_tag(buf[lt:], held):
                    if lt > run:
                        self._content(buf[run:lt])
                    self._pending = buf[lt:]
                    return
                lt = buf.find("<", lt + 1)
        if run < end:
            self._content(buf[run:] if run else buf)

    def _whole_parameter(self, buf: str, start: int, name: str | None) -> bool:
        """Fast path for a parameter whose value and closer are all in ``buf``: take
        its value in one step, as the general path would piece by piece. Returns
        False (and does nothing) when that path must run instead."""
        invoke = self._stack[-1]
        block = self._open
        if self._silent or block is None or block.frame is not invoke:
            return False
        m = _search_param_end(buf, start)
        if m is None or m.end() - m.start() > MAX_TAG_LENGTH + 1:
            return False
        value = buf[start : m.start()]
        invoke.params[name or ""] = value
        if value:
            self._chunk(invoke, value, "input")
        # </parameter> is taken here; </invoke> or </function_calls> (which also
        # close the parameter) are left for the scan to act on.
        self._param_end = m.end() if m.lastindex == 1 else m.start()
        return True

    def _content(self, text: str) -> None:
        top = self._stack[-1]
        kind = top.kind
        if kind is Kind.ROOT:
            if self._silent:
                return
            if self._open is None or self._open.frame is not top:
                # Whitespace between blocks (`</thinking>\n<function_calls>`) is
                # layout, as in chat mode: a text block opens at its first
                # non-space character, taking the whitespace before it along
                # (across hidden blocks too, when it separates two words).
                if text.isspace():
                    self._lead_space.append(text)
                    return
                if self._lead_space:
                    text = "".join(self._lead_space) + text
                    self._lead_space.clear()
            self._chunk(top, text)
            self._separates = not text[-1].isspace()
        elif kind is Kind.THINKING:
            if not self._silent:
                self._chunk(top, text)
        elif kind is Kind.PARAM:
            top.parts.append(text)
            if not self._silent:
                self._chunk(self._stack[-2], text, "input")
        elif kind is Kind.RESULT:
            if not self._silent:
                text = self._entities.decode(text)
                if text:
                    self._chunk(top, text)
        else:
            self._stray.append(text)

    def _end_segment(self) -> None:
        """A tag (or the end) closes the current run of text: settle what waited for it."""
        held = self._entities.take_held()
        if held:
            self._chunk(self._stack[-1], held)
        stray = self._stray
        if not stray:
            return
        text = stray[0] if len(stray) == 1 else "".join(stray)
        stray.clear()
        if self._silent or not text or text.isspace():
            return
        top = self._stack[-1]
        if top.kind is Kind.INVOKE:
            top.parts.append(text)
            self._chunk(top, text, None)
        else:  # between invokes or results: a block of its own
            self._chunk(top, text, None)
            self._complete()

    # ------------------------------------------------------------------ structure

    def _on_tag(self, key: TagKey, value: str | None) -> None:
        if self._lead_space and not self._separates:
            # A block boundary: whitespace before it opened nothing and separates
            # nothing (no visible word before it), so it is layout.
            self._lead_space.clear()
        closing, name = key
        if closing:
            self._close(CLOSES[name])
            return
        top = self._stack[-1]
        if name == "thinking":
            self._push(Frame(Kind.THINKING, top.depth), eager=True)
        elif name == "function_calls":
            self._push(Frame(Kind.CALLS, top.depth + 1))
        elif name == "function_results":
            self._push(Frame(Kind.RESULTS, top.depth + 1))
        elif name == "invoke":
            if top.kind is Kind.ROOT:
                top = Frame(Kind.CALLS, top.depth + 1, implicit=True)
                self._push(top)
            self._invokes += 1
            while (tool_id := f"{self._id_prefix}{self._invokes}") in self._taken_ids:
                self._invokes += 1
            self._tool_names[tool_id] = value or ""
            self._push(Frame(Kind.INVOKE, top.depth, tool_name=value, tool_id=tool_id), True)
        elif name == "parameter":
            self._stack.append(Frame(Kind.PARAM, top.depth, param_name=value or ""))
        else:  # result / error
            frame = Frame(Kind.RESULT, top.depth, tool_id=value, is_error=name == "error")
            self._push(frame, eager=True)

    def _push(self, frame: Frame, eager: bool = False) -> None:
        # Every container boundary ends the block being emitted.
        if self._open is not None and not self._silent:
            self._complete()
        self._stack.append(frame)
        if eager and not self._silent:
            self._block_for(frame)

    def _close(self, kind: Kind) -> None:
        while True:
            frame = self._stack.pop()
            self._finish(frame)
            if frame.kind is kind:
                break
        top = self._stack[-1]
        if kind is Kind.INVOKE and top.implicit:
            self._finish(self._stack.pop())

    def _finish(self, frame: Frame) -> None:
        """A frame is closed (by its tag, an enclosing closer, or the end)."""
        if frame.kind is Kind.PARAM:
            self._stack[-1].params[frame.param_name] = "".join(frame.parts)
            return
        if self._silent:
            return
        if frame.kind in (Kind.THINKING, Kind.INVOKE, Kind.RESULT) and not frame.started:
            # Opened in the prefill: the block still completes in this stream.
            self._block_for(frame)
        if self._open is not None and self._open.frame is frame:
            self._complete()

    # ------------------------------------------------------------------ emission

    def _chunk(self, frame: Frame, text: str, part: ToolCallPart | None = None) -> None:
        block = self._open
        if block is None or block.frame is not frame:
            block = self._block_for(frame)
        block.parts.append(text)
        meta = block.metas.get(part)
        if meta is None:
            meta = block.metas[part] = self._meta(block, part)
        self._out.append(Chunk(text, meta))

    def _block_for(self, frame: Frame) -> OpenBlock:
        if self._open is not None:
            if self._open.frame is frame:
                return self._open
            self._complete()
        block = self._open = OpenBlock(self._next_index, BLOCK_TYPE[frame.kind], frame)
        self._next_index += 1
        frame.started = True
        self._out.append(BlockStart(block.index, block.type))
        if frame.kind is Kind.INVOKE:
            if frame.tool_name:
                self._chunk(frame, frame.tool_name, "name")
            assert frame.tool_id is not None
            self._chunk(frame, frame.tool_id, "id")
        return block

    def _tool_name(self, frame: Frame) -> str | None:
        if frame.kind is Kind.RESULT and frame.tool_id is not None:
            return self._tool_names.get(frame.tool_id)  # the call this result answers
        return frame.tool_name

    def _meta(self, block: OpenBlock, part: ToolCallPart | None) -> ChunkMeta:
        frame = block.frame
        return ChunkMeta(
            type=block.type,
            visible=block.type == "text",
            block_index=block.index,
            depth=frame.depth,
            tool_call_part=part,
            tool_id=frame.tool_id,
            tool_name=self._tool_name(frame),
        )

    def _complete(self) -> None:
        block = self._open
        assert block is not None
        self._open = None
        frame = block.frame
        if block.type == "tool_call":
            stray = "".join(frame.parts) if frame.kind is Kind.INVOKE else "".join(block.parts)
            result = Block(
                type="tool_call",
                content=stray or None,
                tool_id=frame.tool_id,
                tool_name=frame.tool_name,
                input={name: parse_parameter_value(v) for name, v in frame.params.items()},
            )
        elif block.type == "tool_result":
            result = Block(
                type="tool_result",
                content="".join(block.parts),
                tool_id=frame.tool_id,
                tool_name=self._tool_name(frame),
                is_error=frame.is_error,
            )
        else:
            result = Block(type=block.type, content="".join(block.parts))
        self._out.append(BlockComplete(block.index, result))

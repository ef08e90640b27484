"""Tool calls written as JSON inside a reply's text, taken out before they are spoken.

Many small and local models call tools by writing JSON into their text:

- ``{"tool": "get_weather", "params": {"city": "Paris"}}``
- ``{"name": "get_weather", "arguments": {"city": "Paris"}}`` (``arguments``
  may also be a JSON string; ``parameters`` and ``input`` are read too)
- either wrapped as ``<tool_call>{…}</tool_call>`` or in a fenced json block.

``JsonToolInterceptor`` (sans-I/O: ``feed(text)`` / ``flush()``, the event
vocabulary of ``XmlStreamParser``) reads such text as a state machine:
narrative → maybe a tool call (a ``{``, ``<`` or backtick that could begin one)
→ in a tool call (brace depth counted outside JSON strings, escapes honoured) →
narrative again. Narrative passes as visible ``text`` as soon as it cannot be
the start of a call; a call becomes a hidden ``tool_call`` block, never spoken,
that the tool loop runs.

A false alarm (``{ key: value }`` in prose, ``{1, 2, 3}``, a JSON object that is
not a call) flows on as narrative, unchanged. Until a call is recognised — by
its first key (``tool``, ``name``, ``tool_name``, ``function``) or by its
wrapper — at most ``max_hold`` characters (default 200) wait, so a false alarm
costs little latency. ``mode``: ``"buffer"`` (the default, as above),
``"placeholder"`` (as above, and ``placeholder`` is said when a call is
recognised, so the user hears something while it runs) or ``"passthrough"``
(no interception: all text is narrative).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Literal

from ..vocab.events import Block, BlockComplete, BlockStart, Chunk, ChunkMeta, Event

Mode = Literal["buffer", "placeholder", "passthrough"]
MODES: tuple[Mode, ...] = ("buffer", "placeholder", "passthrough")

_TRIGGERS = re.compile(r"[{<`]")
_NAME_KEYS = ("tool", "name", "tool_name", "function")
_ARG_KEYS = ("params", "arguments", "parameters", "input", "args")
_BARE_START = re.compile(r'\{\s*"(?:tool|name|tool_name|function)"\s*:')
_TAG_OPEN, _TAG_CLOSE = "<tool_call>", "</tool_call>"
_FENCE_OPEN = re.compile(r"```(?:json)?[ \t]*\r?\n\s*")
MAX_CALL_CHARS = 32_000  # a call longer than this is not a call (a runaway brace)


class JsonToolInterceptor:
    def __init__(
        self,
        *,
        mode: Mode = "buffer",
        max_hold: int = 200,
        placeholder: str = "One moment.",
        id_prefix: str = "toolu_json_",
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if max_hold < 16:
            raise ValueError("max_hold must be at least 16 characters")
        self.mode, self.max_hold, self.placeholder = mode, max_hold, placeholder
        self._id_prefix = id_prefix
        self._taken_ids: set[str] = set()
        self._calls = 0
        self._pending = ""  # text that may be (part of) a tool call
        self._next_index = 0
        self._text_index: int | None = None  # the open text block
        self._text: list[str] = []
        self._out: list[Event] = []

    # ------------------------------------------------------------------ interface

    def feed(self, text: str) -> list[Event]:
        if self.mode == "passthrough":
            self._narrative(text)
        else:
            self._pending += text
            self._scan(final=False)
        return self._take()

    def flush(self) -> list[Event]:
        self._scan(final=True)
        self._close_text()
        return self._take()

    @property
    def next_block_index(self) -> int:
        return self._next_index

    def skip_to(self, index: int) -> None:
        """Number the next block ``index`` (when composed with another parser)."""
        self._close_text()
        self._next_index = max(self._next_index, index)

    def reserve_ids(self, ids: Iterable[str]) -> None:
        """Tool ids already in the conversation: generated ids skip them."""
        self._taken_ids.update(ids)

    @property
    def holding(self) -> bool:
        """Text is held back (it may be the start of a tool call)."""
        return bool(self._pending)

    # ------------------------------------------------------------------ scanning

    def _scan(self, *, final: bool) -> None:
        while self._pending:
            trigger = _TRIGGERS.search(self._pending)
            if trigger is None:
                self._narrative(self._pending)
                self._pending = ""
                return
            if trigger.start():
                self._narrative(self._pending[: trigger.start()])
                self._pending = self._pending[trigger.start() :]
            verdict = self._judge(self._pending, final)
            if verdict is None:  # not decided yet: wait for more text
                return
            if isinstance(verdict, int):  # a false alarm: this much is narrative
                self._narrative(self._pending[:verdict])
                self._pending = self._pending[verdict:]
                continue
            length, call = verdict
            if call is None:
                self._stray(self._pending[:length])
            else:
                self._tool_call(call)
            self._pending = self._pending[length:]

    def _judge(self, text: str, final: bool) -> int | tuple[int, _Call | None] | None:
        """What ``text`` (starting at a trigger) begins: a call (its length and
        what it calls), narrative (how much of it), or None (cannot tell yet)."""
        opening = self._opening(text, final)
        if opening is None:
            return None
        if opening is False:
            return 1  # the trigger character is narrative; what follows is looked at again
        json_start, wrapper = opening
        end = _json_end(text, json_start)
        if end is None:  # the object is still open
            if final or len(text) > MAX_CALL_CHARS:
                # A call begun and never closed (the reply was cut off): not run, and
                # not spoken either — it is kept hidden as a call with no name.
                return len(text), None
            return None
        closing = _closing(text, end, wrapper, final)
        if closing is None:
            return None
        call = _read_call(text[json_start:end])
        if call is None:
            # Well-formed JSON that calls nothing, or not JSON at all: say it as it was
            # written (skipping past it, so its inner braces are not looked at again).
            return end
        return closing, call

    def _opening(self, text: str, final: bool) -> tuple[int, str] | Literal[False] | None:
        """Where the JSON of a call starts and its wrapper (``""``, ``"tag"`` or
        ``"fence"``); False if ``text`` cannot begin a call; None if it cannot
        be told yet."""
        first = text[0]
        if first == "{":
            if _BARE_START.match(text):
                return 0, ""
            return _undecided(_could_open_bare(text), text, final, self.max_hold)
        if first == "<":
            if text.startswith(_TAG_OPEN):
                rest = len(_TAG_OPEN) + _spaces(text, len(_TAG_OPEN))
                if rest < len(text):
                    return (rest, "tag") if text[rest] == "{" else False
                return _undecided(True, text, final, self.max_hold)
            return _undecided(_TAG_OPEN.startswith(text), text, final, self.max_hold)
        fence = _FENCE_OPEN.match(text)
        if fence is not None and fence.end() < len(text):
            return (fence.end(), "fence") if text[fence.end()] == "{" else False
        return _undecided(_could_open_fence(text), text, final, self.max_hold)

    # ------------------------------------------------------------------ output

    def _narrative(self, text: str) -> None:
        if not text:
            return
        if self._text_index is None:
            self._text_index = self._next_index
            self._next_index += 1
            self._out.append(BlockStart(self._text_index, "text"))
        self._text.append(text)
        self._out.append(Chunk(text, ChunkMeta("text", True, self._text_index)))

    def _close_text(self) -> None:
        if self._text_index is not None:
            block = Block("text", content="".join(self._text))
            self._out.append(BlockComplete(self._text_index, block))
            self._text_index, self._text = None, []

    def _stray(self, written: str) -> None:
        """An unfinished call: a hidden ``tool_call`` block with no name (never run)."""
        self._close_text()
        index = self._next_index
        self._next_index += 1
        meta = ChunkMeta("tool_call", False, index, 0, None)
        self._out += [
            BlockStart(index, "tool_call"),
            Chunk(written, meta),
            BlockComplete(index, Block("tool_call", content=written)),
        ]

    def _tool_call(self, call: _Call) -> None:
        if self.mode == "placeholder" and self.placeholder:
            said = "".join(self._text)
            space = " " if said and not said[-1].isspace() else ""
            self._narrative(space + self.placeholder)
        self._close_text()
        index = self._next_index
        self._next_index += 1
        self._calls += 1
        while (tool_id := f"{self._id_prefix}{self._calls}") in self._taken_ids:
            self._calls += 1
        name, arguments = call

        def meta(part: Literal["name", "input"]) -> ChunkMeta:
            return ChunkMeta("tool_call", False, index, 0, part, tool_id, name)

        self._out.append(BlockStart(index, "tool_call"))
        self._out.append(Chunk(name, meta("name")))
        self._out.append(Chunk(json.dumps(arguments, ensure_ascii=False), meta("input")))
        self._out.append(
            BlockComplete(
                index, Block("tool_call", tool_id=tool_id, tool_name=name, input=arguments)
            )
        )

    def _take(self) -> list[Event]:
        out, self._out = self._out, []
        return out


_Call = tuple[str, dict[str, Any]]


def _undecided(possible: bool, text: str, final: bool, max_hold: int) -> Literal[False] | None:
    """Not a call yet: wait (None) while it still could be one, within the hold."""
    if possible and not final and len(text) <= max_hold:
        return None
    return False


def _spaces(text: str, at: int) -> int:
    n = 0
    while at + n < len(text) and text[at + n].isspace():
        n += 1
    return n


def _could_open_bare(text: str) -> bool:
    """``text`` (a ``{`` and what follows) may still become ``{"tool":`` & co."""
    at = 1 + _spaces(text, 1)
    if at == len(text):
        return True
    if text[at] != '"':
        return False
    key_end = text.find('"', at + 1)
    if key_end == -1:
        typed = text[at + 1 :]
        return any(key.startswith(typed) for key in _NAME_KEYS)
    if text[at + 1 : key_end] not in _NAME_KEYS:
        return False
    after = key_end + 1 + _spaces(text, key_end + 1)
    return after == len(text)  # (a ':' there would have matched _BARE_START)


_FENCE_PREFIX = re.compile(r"`{1,3}|```(?:j|js|jso|json)?[ \t]*\r?|```(?:json)?[ \t]*\r?\n\s*")


def _could_open_fence(text: str) -> bool:
    """``text`` (a backtick and what follows) may still become a json fence."""
    return _FENCE_PREFIX.fullmatch(text) is not None


def _json_end(text: str, start: int) -> int | None:
    """The end (exclusive) of the JSON object starting at ``start``, or None while
    it is open. Braces inside strings do not count; backslash escapes are honoured."""
    depth = 0
    in_string = escaped = False
    for at in range(start, len(text)):
        char = text[at]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return at + 1
    return None


def _closing(text: str, end: int, wrapper: str, final: bool) -> int | None:
    """Where the call's text ends: after its closing tag or fence if it has one
    (a missing one is forgiven: what follows is narrative), else at the JSON's end."""
    if not wrapper:
        return end
    close = _TAG_CLOSE if wrapper == "tag" else "```"
    at = end + _spaces(text, end)
    rest = text[at:]
    if rest.startswith(close):
        return at + len(close)
    if close.startswith(rest) and not final:
        return None  # the closing may be arriving
    return end


def _read_call(written: str) -> _Call | None:
    """The tool name and arguments ``written`` calls, or None if it calls nothing."""
    try:
        value = json.loads(written)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    name: Any = None
    arguments: Any = None
    for key in _NAME_KEYS:
        if key in value:
            name = value[key]
            break
    if isinstance(name, dict):  # {"function": {"name": …, "arguments": …}}
        inner = name
        name = inner.get("name")
        arguments = next((inner[k] for k in _ARG_KEYS if k in inner), None)
    has_arguments = arguments is not None or any(k in value for k in _ARG_KEYS)
    if arguments is None:
        arguments = next((value[k] for k in _ARG_KEYS if k in value), {})
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        return None
    if "tool" not in value and "tool_name" not in value and not has_arguments:
        return None  # {"name": "Bob"} is a person, not a call
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return name.strip(), arguments


class JsonToolsInText:
    """JSON tool calls taken out of the visible text of another parser's events
    (``XmlStreamParser`` or ``NativeBlockAssembler``), so a model may call tools
    either way. Every other block passes unchanged; block indices are numbered
    afresh, in order, as the calls split text blocks. A call never spans two
    text blocks: each text block's end is the interceptor's end of stream."""

    def __init__(self, interceptor: JsonToolInterceptor) -> None:
        self.interceptor = interceptor
        self._next = 0
        self._index: dict[int, int] = {}  # upstream index → ours (non-text blocks)
        self._text_open: int | None = None  # the upstream text block being read

    def feed(self, events: Iterable[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if isinstance(event, BlockStart):
                if event.type == "text":
                    self._text_open = event.index
                    self.interceptor.skip_to(self._next)
                else:
                    self._index[event.index] = self._next
                    out.append(BlockStart(self._next, event.type))
                    self._next += 1
            elif isinstance(event, Chunk):
                upstream = event.meta.block_index
                if event.meta.type == "text" and upstream == self._text_open:
                    out += self._read(self.interceptor.feed(event.text))
                else:
                    index = self._ours(upstream)
                    out.append(Chunk(event.text, replace(event.meta, block_index=index)))
            elif event.block.type == "text" and event.index == self._text_open:
                out += self._read(self.interceptor.flush())
                self._text_open = None
            else:
                out.append(BlockComplete(self._ours(event.index), event.block))
        return out

    def flush(self) -> list[Event]:
        """The end of the reply: text still held (a block never completed) is read."""
        if self._text_open is None:
            return []
        self._text_open = None
        return self._read(self.interceptor.flush())

    def _read(self, events: list[Event]) -> list[Event]:
        self._next = max(self._next, self.interceptor.next_block_index)
        return events

    def _ours(self, upstream: int) -> int:
        if upstream not in self._index:  # (a chunk with no start: malformed upstream)
            self._index[upstream] = self._next
            self._next += 1
        return self._index[upstream]

"""NativeBlockAssembler: native (chat-mode) block events → the event vocabulary.

Providers in chat mode report structure natively — Anthropic's
``content_block_start/delta/stop``, OpenAI's content / reasoning / tool-call
deltas, Gemini's parts. Their adapters reduce that to three calls —
``start(type, …)``, ``delta(text)``, ``stop(…)`` — and this class turns them
into the same ``BlockStart`` / ``Chunk`` / ``BlockComplete`` sequence the XML
parser produces for the same logical reply:

- a text block opens at its first non-whitespace text; a text block that holds
  only whitespace is layout and never emitted (as between XML blocks), but when
  it is the only separator between two visible words its whitespace opens the
  next text block, so the visible text never joins two words;
- a thinking block opens at its start, so an empty one still appears;
- a tool call opens with its name chunk and id chunk (``tool_call_part`` "name",
  "id"), then the JSON input fragments as "input" chunks, at ``depth`` 1; it
  completes with the parsed input (malformed JSON is kept as the block's
  ``content`` with an empty input, never lost);
- ``tool_result(…)`` emits a whole tool result block (the tool loop's results);
- an image block (a generated image) opens at its start (or at its first
  ``NativeImage`` when no start came) and has no chunks: ``image(…)`` keeps its
  final image, which completes the block (partial images are the reply loop's
  to pass on: they are not events); text inside it is stray.

Visibility is decided here, by construction: a chunk is visible only when it
belongs to an open block of the one visible type, ``text``. Anything the
assembler cannot place — a delta with no open block, a delta of a block whose
type it does not know, a ``StrayDelta`` (text its reader could not place) — is
stray: kept hidden (logged), as a block of its own shaped like the XML parser's
stray text between calls (a ``tool_call`` block with no name, no id and the
text as ``content``; whitespace alone is dropped). A stray block never
interrupts the open block: it is emitted at the next block boundary (a start,
a stop, a tool result, the end).

A tool call whose id is missing gets one generated (``toolu_gen_1``, …, counted
per assembler, so stable for a given stream): an id is what its result answers.

Block indices continue across calls of a tool loop: one assembler serves a whole
``Membrane.stream``.
"""

from __future__ import annotations

import json
import logging
from typing import Any, get_args

from ..vocab.events import Block, BlockComplete, BlockStart, Chunk, ChunkMeta, Event, ToolCallPart
from ..vocab.messages import GeneratedImageContent
from ..vocab.provider_output import (
    NativeDelta,
    NativeImage,
    NativeStart,
    NativeStop,
    NativeType,
    ProviderOutput,
    StrayDelta,
)

KNOWN_TYPES: frozenset[str] = frozenset(get_args(NativeType))
_log = logging.getLogger(__name__)


class NativeBlockAssembler:
    def __init__(self, first_index: int = 0) -> None:
        self._next_index = first_index
        self._type: NativeType | None = None  # the open native block, if any
        self._index: int | None = None  # its event index once emitted
        self._parts: list[str] = []
        self._held_space: list[str] = []  # leading whitespace of a text block
        # The visible text so far ends inside a word: a whitespace-only text block
        # is then the separator, kept for the next text block (as in the XML parser).
        self._separates = False
        self._tool_id: str | None = None
        self._tool_name: str | None = None
        self._redacted: str | None = None
        self._metas: dict[ToolCallPart | None, ChunkMeta] = {}
        self._unknown: str | None = None  # the open block's type when it is not one we know
        self._stray: list[str] = []  # stray text, emitted at the next block boundary
        self._generated_ids = 0
        self._image: GeneratedImageContent | None = None  # the open image block's final image

    @property
    def next_block_index(self) -> int:
        return self._next_index

    def skip_to(self, index: int) -> None:
        """Number the next block at least ``index`` (see ``XmlStreamParser.skip_to``)."""
        self._next_index = max(self._next_index, index)

    @property
    def inside_block(self) -> bool:
        return self._type is not None

    def feed(self, item: ProviderOutput) -> list[Event]:
        """Route one provider output (non-native items give no events)."""
        if isinstance(item, NativeStart):
            return self.start(
                item.type, item.tool_id, item.tool_name, item.redacted_data, prompt=item.prompt
            )
        if isinstance(item, NativeImage):
            return self.image(item.image)
        if isinstance(item, NativeDelta):
            return self.delta(item.text)
        if isinstance(item, StrayDelta):
            self.stray(item.text, item.why)
            return []
        if isinstance(item, NativeStop):
            return self.stop(input=item.input, signature=item.signature)
        return []

    def start(
        self,
        type: NativeType,
        tool_id: str | None = None,
        tool_name: str | None = None,
        redacted_data: str | None = None,
        *,
        prompt: str | None = None,
    ) -> list[Event]:
        out = self.stop()
        if type not in KNOWN_TYPES:  # a new kind of block: its deltas will be stray
            self._unknown = str(type)
            return out
        if type == "tool_call" and not tool_id:
            self._generated_ids += 1
            tool_id = f"toolu_gen_{self._generated_ids}"
            _log.warning("tool call %r came without an id: using %s", tool_name, tool_id)
        self._type, self._tool_id, self._tool_name = type, tool_id, tool_name
        self._redacted = redacted_data
        if type == "image":
            self._open(out, prompt)
        elif type != "text":
            self._open(out)
            if type == "tool_call":
                if tool_name:
                    self._chunk(out, tool_name, "name")
                if tool_id:
                    self._chunk(out, tool_id, "id")
        return out

    def delta(self, text: str) -> list[Event]:
        out: list[Event] = []
        if not text:
            return out
        if self._type is None:  # never visible: no block says what this text is
            where = f"a block of unknown type {self._unknown!r}" if self._unknown else "no block"
            self.stray(text, f"a delta in {where}")
            return out
        if self._type == "image":  # an image has no text: never spoken, kept hidden
            self.stray(text, "a delta in an image block")
            return out
        if self._type == "text" and self._index is None:
            if text.isspace():
                self._held_space.append(text)
                return out
            text = "".join(self._held_space) + text
            self._held_space.clear()
            self._open(out)
        self._chunk(out, text, "input" if self._type == "tool_call" else None)
        if self._type == "text":
            self._separates = not text[-1].isspace()
        return out

    def stop(
        self, *, input: dict[str, Any] | None = None, signature: str | None = None
    ) -> list[Event]:
        out: list[Event] = []
        if self._type is not None and self._index is not None:
            out.append(BlockComplete(self._index, self._block(input, signature)))
        self._type = self._index = self._unknown = None
        self._parts, self._metas, self._image = [], {}, None
        if not self._separates:
            self._held_space = []
        self._emit_stray(out)
        return out

    def image(self, image: GeneratedImageContent) -> list[Event]:
        """A generated image: the open image block's final image (a partial one
        only opens the block). An image with no image block open opens one."""
        out = [] if self._type == "image" else self.start("image", prompt=_prompt(image))
        if not image.is_preview:
            self._image = image
        return out

    def stray(self, text: str, why: str) -> None:
        """Text that belongs to no block known to be visible: held, then emitted
        hidden at the next block boundary."""
        if not text:
            return
        if not self._stray:
            _log.warning("stray model output kept hidden (%s): %.60r", why, text)
        self._stray.append(text)

    def flush(self) -> list[Event]:
        """End of stream (or a stream cut short): complete the open block."""
        return self.stop()

    def tool_result(
        self, tool_id: str, content: str, *, tool_name: str | None = None, is_error: bool = False
    ) -> list[Event]:
        """A whole tool result block (the tool loop's output)."""
        out = self.stop()
        index = self._next_index
        self._next_index += 1
        out.append(BlockStart(index, "tool_result"))
        if content:
            meta = ChunkMeta("tool_result", False, index, 1, None, tool_id, tool_name)
            out.append(Chunk(content, meta))
        block = Block("tool_result", content, tool_id, tool_name, is_error=is_error)
        out.append(BlockComplete(index, block))
        return out

    # ------------------------------------------------------------------ internals

    def _emit_stray(self, out: list[Event]) -> None:
        """The held stray text as a hidden block of its own (like the XML parser's
        stray text between calls: a tool call with no name, never run)."""
        text, self._stray = "".join(self._stray), []
        if not text.strip():
            return  # whitespace is layout
        index = self._next_index
        self._next_index += 1
        meta = ChunkMeta("tool_call", False, index, 1)
        block = Block("tool_call", text, input={})
        out += [BlockStart(index, "tool_call"), Chunk(text, meta), BlockComplete(index, block)]

    def _open(self, out: list[Event], prompt: str | None = None) -> None:
        assert self._type is not None
        self._index = self._next_index
        self._next_index += 1
        out.append(BlockStart(self._index, self._type, prompt))

    def _chunk(self, out: list[Event], text: str, part: ToolCallPart | None) -> None:
        assert self._type is not None and self._index is not None
        if part != "name" and part != "id":
            self._parts.append(text)
        meta = self._metas.get(part)
        if meta is None:
            tool = self._type == "tool_call"
            meta = self._metas[part] = ChunkMeta(
                type=self._type,
                visible=self._type == "text",
                block_index=self._index,
                depth=1 if tool else 0,
                tool_call_part=part if tool else None,
                tool_id=self._tool_id if tool else None,
                tool_name=self._tool_name if tool else None,
            )
        out.append(Chunk(text, meta))

    def _block(self, input: dict[str, Any] | None, signature: str | None) -> Block:
        content = "".join(self._parts)
        if self._type == "tool_call":
            stray = None
            if input is None:
                input, stray = _parse_input(content)
            return Block(
                "tool_call", stray, self._tool_id, self._tool_name, input, signature=signature
            )
        if self._type == "thinking":
            return Block("thinking", content, signature=signature, redacted_data=self._redacted)
        if self._type == "image":
            if self._image is None:
                _log.warning("image block %s ended without its final image", self._index)
            return Block("image", image=self._image)
        return Block("text", content)


def _prompt(image: GeneratedImageContent) -> str | None:
    return image.generation.prompt if image.generation is not None else None


def _parse_input(text: str) -> tuple[dict[str, Any], str | None]:
    """A tool call's streamed JSON input; malformed input is returned as stray text."""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}, text
    if not isinstance(value, dict):
        return {}, text
    return value, None

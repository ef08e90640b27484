"""The event vocabulary every stage speaks.

A provider stream, whatever its wire format, becomes a sequence of three events:

- ``BlockStart(index, type)`` — a logical block begins;
- ``Chunk(text, meta)`` — a piece of that block's content, with ``meta`` saying
  which block it belongs to and whether it may be spoken (``meta.visible``);
- ``BlockComplete(index, block)`` — the block ended; ``block`` holds all of it.

``BlockStart`` always precedes the first ``Chunk`` of its block and
``BlockComplete`` follows the last. Block indices run 0, 1, 2… in order. Wire
format (XML tags in prefill mode, native event framing in chat mode) never
appears in a ``Chunk``.

These are frozen, slotted dataclasses: they sit on the hot path and are shared
between stages, so they are cheap and cannot be mutated by a consumer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from .messages import GeneratedImageContent

BlockType: TypeAlias = Literal["text", "thinking", "tool_call", "tool_result", "image"]
"""The logical kind of a block. Only ``text`` is ever visible; an ``image`` block
(a generated image) has no chunks: its image is on its ``Block``."""

ToolCallPart: TypeAlias = Literal["name", "id", "input"]
"""Which part of a tool call a ``tool_call`` chunk carries."""

BLOCK_TYPES: tuple[BlockType, ...] = ("text", "thinking", "tool_call", "tool_result", "image")


@dataclass(frozen=True, slots=True)
class ChunkMeta:
    """Where a chunk of content belongs.

    Attributes:
        type: the block type the chunk belongs to.
        visible: True only for ``text`` — the one thing that may reach speech.
        block_index: index of the block (same as its ``BlockStart.index``).
        depth: how many tool containers (function calls / function results)
            enclose the chunk; 0 for top-level text and thinking.
        tool_call_part: for ``tool_call`` chunks, which part they carry:
            ``"name"``, ``"id"``, ``"input"`` (parameter content), or None for
            stray text inside a call that belongs to no part (malformed output).
        tool_id: the tool-use id, for ``tool_call`` and ``tool_result`` chunks.
        tool_name: the tool's name, for ``tool_call`` chunks and for
            ``tool_result`` chunks whose call was seen by the same parser.
    """

    type: BlockType
    visible: bool
    block_index: int
    depth: int = 0
    tool_call_part: ToolCallPart | None = None
    tool_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of block content. ``text`` is never empty."""

    text: str
    meta: ChunkMeta


@dataclass(frozen=True, slots=True)
class Block:
    """A complete logical block.

    Attributes:
        type: the block type.
        content: the full text of a ``text``, ``thinking`` or ``tool_result``
            block (the concatenation of its chunks). For a ``tool_call`` block it
            is None unless the call held text outside any parameter, which is
            kept here rather than lost.
        tool_id: the tool-use id (``tool_call`` and ``tool_result``).
        tool_name: the tool's name (``tool_call``; ``tool_result`` when known).
        input: a ``tool_call``'s parameters: name → value, each value parsed as
            JSON where it is valid JSON, else the raw string.
        is_error: True for a ``tool_result`` that reports an error.
        signature: a ``thinking`` block's signature (chat mode, Anthropic), kept
            so the block can be sent back in the next request.
        redacted_data: an encrypted (redacted) thinking block's data (Anthropic).
        image: an ``image`` block's final generated image (None if the stream
            ended before it arrived).
    """

    type: BlockType
    content: str | None = None
    tool_id: str | None = None
    tool_name: str | None = None
    input: dict[str, Any] | None = None
    is_error: bool = False
    signature: str | None = None
    redacted_data: str | None = None
    image: GeneratedImageContent | None = None


@dataclass(frozen=True, slots=True)
class BlockStart:
    """A block begins; its chunks follow. ``prompt``: an ``image`` block's prompt,
    when it is known as generation starts (an image tool's call)."""

    index: int
    type: BlockType
    prompt: str | None = None


@dataclass(frozen=True, slots=True)
class BlockComplete:
    """A block ended; ``block`` holds its accumulated content."""

    index: int
    block: Block


Event: TypeAlias = Chunk | BlockStart | BlockComplete
"""Anything a stream parser emits, in emission order."""


def merge_adjacent_chunks(events: list[Event]) -> list[Event]:
    """The same events with runs of adjacent chunks of identical ``meta`` joined.

    Two streams that differ only in where the provider split its text give the
    same merged sequence; use it to compare streams or to print a compact log.
    """
    merged: list[Event] = []
    for event in events:
        if isinstance(event, Chunk) and merged:
            last = merged[-1]
            if isinstance(last, Chunk) and last.meta == event.meta:
                merged[-1] = Chunk(last.text + event.text, event.meta)
                continue
        merged.append(event)
    return merged

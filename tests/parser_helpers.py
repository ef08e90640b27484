"""Shared helpers for the parser tests."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

from voice_membrane.parse import XmlStreamParser
from voice_membrane.vocab.events import (
    BlockComplete,
    BlockStart,
    Chunk,
    Event,
    merge_adjacent_chunks,
)

KNOWN_TAG = re.compile(
    r"</?(?:antml:)?(?:thinking|function_calls|function_results|invoke|parameter|result|error)"
    r"(?:\s[^>]*)?>"
)


def parse(pieces: Iterable[str], prefill: str = "") -> list[Event]:
    parser = XmlStreamParser(prefill)
    events: list[Event] = []
    for piece in pieces:
        events += parser.feed(piece)
    events += parser.flush()
    check_well_formed(events)
    return events


def split_at(text: str, cuts: Iterable[int]) -> list[str]:
    points = sorted({c for c in cuts if 0 < c < len(text)})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def visible_text(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, Chunk) and e.meta.visible)


def completed(events: list[Event]) -> list[BlockComplete]:
    return [e for e in events if isinstance(e, BlockComplete)]


def shape(events: list[Event]) -> list[tuple[object, ...]]:
    """A compact, comparable picture of a merged event sequence."""
    out: list[tuple[object, ...]] = []
    for e in merge_adjacent_chunks(events):
        if isinstance(e, BlockStart):
            out.append(("start", e.index, e.type))
        elif isinstance(e, Chunk):
            out.append(("chunk", e.meta.block_index, e.meta.type, e.meta.tool_call_part, e.text))
        else:
            out.append(("complete", e.index, e.block.type))
    return out


def check_well_formed(events: list[Event]) -> None:
    """Block events bracket their chunks; indices run 0, 1, 2…; content adds up;
    only text is visible; no chunk is empty."""
    open_index: int | None = None
    open_type = None
    parts: list[str] = []
    expected_index = 0
    for e in events:
        if isinstance(e, BlockStart):
            assert open_index is None, f"block {e.index} starts inside block {open_index}"
            assert e.index == expected_index, (e.index, expected_index)
            open_index, open_type, parts = e.index, e.type, []
        elif isinstance(e, Chunk):
            assert open_index is not None, f"chunk {e.text!r} outside any block"
            assert e.meta.block_index == open_index
            assert e.meta.type == open_type
            assert e.meta.visible == (e.meta.type == "text")
            assert e.text, "empty chunk"
            if e.meta.tool_call_part in (None, "input") or e.meta.type != "tool_call":
                parts.append(e.text)
        else:
            assert open_index == e.index, f"complete {e.index} while {open_index} is open"
            assert e.block.type == open_type
            if e.block.type in ("text", "thinking", "tool_result"):
                assert e.block.content == "".join(parts)
            open_index = None
            expected_index += 1
    assert open_index is None, "stream ended with an open block"

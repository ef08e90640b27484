"""Parser state: the stack of open wire-format containers and the block being emitted."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Final

from ..vocab.events import BlockType, ChunkMeta, ToolCallPart
from .tags import ALL_TAGS, TagKey


class Kind(Enum):
    """What the text at a point of the stream is inside of."""

    ROOT = auto()  # top level: visible text
    THINKING = auto()  # <thinking>: opaque until </thinking>
    CALLS = auto()  # <function_calls>: holds invokes
    INVOKE = auto()  # <invoke name=…>: one tool call, holds parameters
    PARAM = auto()  # <parameter name=…>: a raw value, opaque until a closer
    RESULTS = auto()  # <function_results>: holds results
    RESULT = auto()  # <result|error tool_use_id=…>: a tool's output (XML-escaped)

    # Members are singletons: hash by identity, in C (Enum's own __hash__ runs in
    # Python, and the scanner looks kinds up in its tables at every tag).
    __hash__ = object.__hash__


_O, _C = False, True  # opener / closer, for the tables below

STRUCTURAL: Final[dict[Kind, frozenset[TagKey]]] = {
    Kind.ROOT: frozenset(
        {(_O, "thinking"), (_O, "function_calls"), (_O, "function_results"), (_O, "invoke")}
    ),
    Kind.THINKING: frozenset({(_C, "thinking")}),
    Kind.CALLS: frozenset({(_O, "invoke"), (_C, "function_calls")}),
    Kind.INVOKE: frozenset({(_O, "parameter"), (_C, "invoke"), (_C, "function_calls")}),
    Kind.PARAM: frozenset({(_C, "parameter"), (_C, "invoke"), (_C, "function_calls")}),
    Kind.RESULTS: frozenset({(_O, "result"), (_O, "error"), (_C, "function_results")}),
    # A result may hold a nested transcript (a sub-agent's calls and results).
    Kind.RESULT: frozenset(
        {
            (_C, "result"),
            (_C, "error"),
            (_C, "function_results"),
            (_O, "function_calls"),
            (_O, "function_results"),
        }
    ),
}
"""The tags that act in each context."""

DROPS_OTHER_TAGS: Final[frozenset[Kind]] = frozenset(
    {Kind.ROOT, Kind.CALLS, Kind.INVOKE, Kind.RESULTS}
)
"""Contexts where a known tag that does not act there is still wire format and is
dropped (so it can never be spoken). Elsewhere (thinking, parameter values, result
bodies) such a tag is ordinary content."""

HELD_TAGS: Final[dict[Kind, frozenset[TagKey]]] = {
    kind: (ALL_TAGS if kind in DROPS_OTHER_TAGS else tags) for kind, tags in STRUCTURAL.items()
}
"""Which tags a partial ``<…`` is held back for, per context."""

CLOSES: Final[dict[str, Kind]] = {
    "thinking": Kind.THINKING,
    "function_calls": Kind.CALLS,
    "function_results": Kind.RESULTS,
    "invoke": Kind.INVOKE,
    "parameter": Kind.PARAM,
    "result": Kind.RESULT,
    "error": Kind.RESULT,
}

BLOCK_TYPE: Final[dict[Kind, BlockType]] = {
    Kind.ROOT: "text",
    Kind.THINKING: "thinking",
    Kind.CALLS: "tool_call",  # only for stray text between invokes
    Kind.INVOKE: "tool_call",
    Kind.RESULTS: "tool_result",  # only for stray text between results
    Kind.RESULT: "tool_result",
}


@dataclass(eq=False, slots=True)
class Frame:
    """One open container. Identity matters: a block belongs to one frame."""

    kind: Kind
    depth: int  # tool containers (CALLS/RESULTS) enclosing this frame, itself included
    implicit: bool = False  # a CALLS opened by a bare <invoke> at top level
    tool_name: str | None = None
    tool_id: str | None = None
    is_error: bool = False
    params: dict[str, str] = field(default_factory=dict)  # INVOKE: parameter name → raw value
    param_name: str = ""  # PARAM
    parts: list[str] = field(default_factory=list)  # PARAM value / INVOKE stray text
    started: bool = False  # a block for this frame has been emitted in this stream


@dataclass(eq=False, slots=True)
class OpenBlock:
    """The block currently being emitted."""

    index: int
    type: BlockType
    frame: Frame
    parts: list[str] = field(default_factory=list)
    metas: dict[ToolCallPart | None, ChunkMeta] = field(default_factory=dict)

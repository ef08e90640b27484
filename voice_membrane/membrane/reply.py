"""What ``Membrane.stream`` yields besides the block events.

``async for item in membrane.stream(request)`` gives, in order: the parser's
``BlockStart`` / ``Chunk`` / ``BlockComplete`` events (tool results included),
``UsageUpdate`` as token counts arrive, ``ImagePreview`` for each partial image
of an image block being generated, ``Retrying`` when a call is retried,
``ReplyError`` if the reply ended on an error, and last one ``ReplyResult``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from ..vendors.errors import ErrorKind
from ..vocab.events import Block, Event
from ..vocab.messages import GeneratedImageContent, Message
from ..vocab.provider_output import StopReason, Usage


@dataclass(frozen=True, slots=True)
class UsageUpdate:
    """Token counts: ``call`` for the current provider call so far, ``total``
    for the whole reply (every call of the tool loop)."""

    call: Usage
    total: Usage


@dataclass(frozen=True, slots=True)
class ImagePreview:
    """A partial image of the ``image`` block ``index`` (between its ``BlockStart``
    and ``BlockComplete``); not an event: policies and parsers never see it."""

    index: int
    image: GeneratedImageContent


@dataclass(frozen=True, slots=True)
class Retrying:
    """A call failed before any output and is retried after ``delay_s``."""

    attempt: int  # 1 for the first retry
    delay_s: float
    error: str


@dataclass(frozen=True, slots=True)
class ReplyError:
    """The reply ended on an error; everything yielded before it stands.

    ``after_output`` says whether the failing call had produced output (then it
    was not retried: a retry would repeat it)."""

    kind: ErrorKind
    message: str
    provider: str
    status: int | None
    after_output: bool


@dataclass(frozen=True, slots=True)
class ReplyResult:
    """The whole reply.

    Attributes:
        blocks: every completed block, tool calls and results included.
        text: the visible text (text blocks joined).
        stop_reason: why the last call ended ("error" if it failed).
        usage: token counts over every call.
        tool_rounds: how many times tools ran.
        messages: the assistant's turn(s) and tool results as normalized
            messages, ready to append to the conversation.
        error: the error message if the reply ended on one.
        terminated: why a stream policy ended the reply, if one did
            (``stop_reason`` is then "policy"); what passed before stands.
    """

    blocks: tuple[Block, ...]
    text: str
    stop_reason: StopReason | str
    usage: Usage
    tool_rounds: int
    messages: tuple[Message, ...]
    error: str | None = None
    terminated: str | None = None


MembraneItem: TypeAlias = Event | UsageUpdate | ImagePreview | Retrying | ReplyError | ReplyResult

"""The formatter interface: normalized messages → one provider request.

A formatter decides how a conversation is written for a model — native roles
and tools (chat mode) or one text transcript the model continues (prefill
mode) — and how the reply is read back and continued after tool calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..parse import XmlStreamParser
from ..vocab.messages import ContentBlock, Request, ToolDefinition, ToolResultContent


@dataclass(frozen=True, slots=True)
class ProviderMessage:
    """A message in provider roles, with normalized content blocks; each provider
    adapter writes these in its own wire shape."""

    role: Literal["user", "assistant"]
    content: list[ContentBlock]


@dataclass(frozen=True, slots=True)
class BuiltRequest:
    """What a formatter produced for one call.

    Attributes:
        mode: ``"prefill"`` — the reply continues ``prefill`` as raw text, read
            by the XML parser; ``"chat"`` — native roles, native blocks.
        messages: the messages before the reply (in prefill mode: whatever must
            precede the transcript, such as a context prefix or images).
        system: the system prompt, if any.
        prefill: prefill mode: the assistant text the reply continues (the
            transcript, ending in ``"{assistant}:"``), with no trailing space.
        open_turn: prefill mode: the part of ``prefill`` inside the assistant
            turn the reply continues (after its ``Name:``) — a thinking cue, or
            the turn's calls and results when it goes on after tools. The
            reply's parser is seeded with this alone, never with earlier turns
            or other participants' text, so nothing a user wrote can change how
            the reply is read.
        prompt: prefill mode: the whole request as one text, for completion
            endpoints (OpenAI legacy Completions, local servers).
        stop_sequences: all stop sequences for this call.
        tools: tools sent natively (None when tools are described in the
            prompt, or there are none).
        end_of_turn: a token that ends the turn when the model writes it (Gemini
            prefill's ``<|eot|>``): the provider strips it and stops reading.
        system_cache: the system prompt is a prompt-cache breakpoint.
        params: extra API parameters passed as they are
            (``RequestOptions.provider_params``).
    """

    mode: Literal["prefill", "chat"]
    messages: list[ProviderMessage]
    system: str | None = None
    prefill: str | None = None
    open_turn: str = ""
    prompt: str | None = None
    stop_sequences: list[str] = field(default_factory=list)
    tools: list[ToolDefinition] | None = None
    end_of_turn: str | None = None
    system_cache: bool = False
    params: dict[str, Any] = field(default_factory=dict)


class Formatter(Protocol):
    """Builds requests for one format and says how to continue after tool calls."""

    name: str
    mode: Literal["prefill", "chat"]

    def build(self, request: Request) -> BuiltRequest:
        """The provider request for ``request``; ``RequestError`` (naming the
        field) for content this format cannot carry."""
        ...

    def create_parser(self, prefill: str = "") -> XmlStreamParser | None:
        """Prefill formats: the parser for the reply, seeded with ``prefill`` (the
        built request's ``open_turn``). Chat formats: None (native blocks need no
        parsing)."""
        ...

    def format_tool_results(
        self, results: Sequence[ToolResultContent], request: Request | None = None
    ) -> str:
        """Prefill formats: the results as the text appended to the assistant
        turn (``<function_results>…``), written as in ``request``'s transcript
        (turn lines of its speakers inert). Chat formats send native tool_result
        messages instead and may return ""."""
        ...

"""What a provider's stream yields, in one vocabulary: the items ``Provider.stream``
produces and the parsers consume.

Raw text (``TextDelta``, read by the XML parser in prefill mode) or native block
events (``NativeStart`` / ``NativeDelta`` / ``NativeStop`` and ``StrayDelta``,
assembled by ``parse.NativeBlockAssembler`` in chat mode), plus ``Usage`` and a
final ``StopInfo``. It sits beside ``events`` (what the parsers produce) so
that the sans-I/O parsers depend on no provider: providers → this ← parse.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from ..infra.surrogates import has_surrogates, replace_surrogates, replace_surrogates_in
from .messages import GeneratedImageContent

_log = logging.getLogger("voice_membrane.providers")

NativeType: TypeAlias = Literal["text", "thinking", "tool_call", "image"]

StopReason: TypeAlias = Literal[
    "end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal", "pause_turn", "other"
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Raw reply text (prefill mode, completions): the XML parser reads it."""

    text: str


@dataclass(frozen=True, slots=True)
class NativeStart:
    """A native content block begins (chat mode)."""

    type: NativeType
    tool_id: str | None = None
    tool_name: str | None = None
    redacted_data: str | None = None  # Anthropic redacted_thinking, kept for the history
    prompt: str | None = None  # an image block's prompt, when known at its start


@dataclass(frozen=True, slots=True)
class NativeDelta:
    """Text, thinking text, or a fragment of a tool call's JSON input."""

    text: str


@dataclass(frozen=True, slots=True)
class NativeImage:
    """A generated image in the open ``image`` block: a partial image
    (``image.is_preview``), or the final one. Never text, never spoken."""

    image: GeneratedImageContent


@dataclass(frozen=True, slots=True)
class StrayDelta:
    """Text the reader cannot place in a block it knows: a delta with no open
    block, one whose kind does not match the open block (``thinking_delta`` in a
    text block), or one of a block type it does not know. Kept hidden, never
    spoken; ``why`` says what was wrong, for the log."""

    text: str
    why: str


@dataclass(frozen=True, slots=True)
class NativeStop:
    """The open native block ends. ``input`` is a tool call's whole input when the
    provider sends it parsed (Gemini); ``signature`` a thinking block's signature."""

    input: dict[str, Any] | None = None
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one call (cumulative within the call)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    thinking_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.thinking_tokens + other.thinking_tokens,
        )


@dataclass(frozen=True, slots=True)
class StopInfo:
    """Why the call ended, in one vocabulary; ``raw`` is the provider's own word."""

    reason: StopReason
    stop_sequence: str | None = None
    raw: str | None = None


ProviderOutput: TypeAlias = (
    TextDelta | NativeStart | NativeDelta | NativeImage | StrayDelta | NativeStop | Usage | StopInfo
)


def clean_output(output: ProviderOutput) -> ProviderOutput:
    """``output`` with every lone surrogate in its text replaced by U+FFFD (see
    ``surrogates``); ``output`` itself when it has none."""
    if isinstance(output, TextDelta | NativeDelta | StrayDelta):  # the hot path: one check
        if not has_surrogates(output.text):
            return output
        _log.warning("lone surrogate in model output replaced with U+FFFD")
        return replace(output, text=replace_surrogates(output.text))
    if isinstance(output, NativeImage):  # base64 and metadata: checked by pydantic, no text
        return output
    changes: dict[str, Any] = {}
    names = ("tool_id", "tool_name", "redacted_data", "signature", "stop_sequence", "raw", "prompt")
    for name in names:
        value = getattr(output, name, None)
        if isinstance(value, str) and has_surrogates(value):
            changes[name] = replace_surrogates(value)
    if isinstance(output, NativeStop) and output.input is not None:
        cleaned = replace_surrogates_in(output.input)
        if cleaned != output.input:
            changes["input"] = cleaned
    if not changes:
        return output
    _log.warning("lone surrogate in model output replaced with U+FFFD (%s)", ", ".join(changes))
    return replace(output, **changes)

"""The interfaces of LLM providers.

Two kinds of source feed a reply:

- ``LlmSource`` (embedded model, recordings): streams text for a plain chat
  conversation; the text is parsed as prefill-mode output.
- ``Provider`` (Anthropic, OpenAI, Gemini over their SDKs, and the embedded
  sources through ``TextSourceProvider``): takes a formatted request
  (``formats.BuiltRequest``) and streams ``ProviderOutput`` items — raw text
  (``TextDelta``, parsed by the XML parser) or native block events
  (``NativeStart`` / ``NativeDelta`` / ``NativeStop``, assembled by
  ``parse.NativeBlockAssembler``), plus ``Usage`` and a final ``StopInfo``.
  ``Membrane`` turns either into the one event vocabulary.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

from ..redact import redact
from ..surrogates import has_surrogates, replace_surrogates, replace_surrogates_in

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..messages import ModelConfig

_log = logging.getLogger("voice_membrane.providers")


class LlmError(RuntimeError):
    """The model could not be loaded or failed while generating."""


ErrorKind: TypeAlias = Literal[
    "rate_limit",  # 429
    "overloaded",  # 529 / 503
    "server",  # other 5xx
    "connection",  # could not connect, or the connection dropped
    "timeout",
    "bad_request",  # 400 / 404 / 422: the request itself is wrong
    "auth",  # 401 / 403
    "stream",  # a malformed or failing stream after it began
]


class ProviderError(LlmError):
    """A provider call failed. ``retryable`` errors (429, 5xx, connection) are
    retried by ``Membrane`` while no output has arrived; after that the reply
    ends with this error and keeps what was produced.

    The message is redacted (``redact.py``): it is built from transport errors
    and URLs, which may quote a key, and it is printed and logged."""

    def __init__(
        self,
        provider: str,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        where = f" (HTTP {status})" if status is not None else ""
        message = redact(message)
        super().__init__(f"{provider}: {kind}{where}: {message}")
        self.provider, self.kind, self.detail = provider, kind, message
        self.status, self.retry_after_s = status, retry_after_s

    @property
    def retryable(self) -> bool:
        return self.kind in ("rate_limit", "overloaded", "server", "connection", "timeout")

    def at(self, url: str | None) -> ProviderError:
        """This error naming the server it could not reach (a connection or timeout
        error says nothing of where it was going: a wrong base URL is the usual cause)."""
        if not url or self.kind not in ("connection", "timeout"):
            return self
        return ProviderError(
            self.provider,
            self.kind,
            f"{self.detail} ({url})",
            status=self.status,
            retry_after_s=self.retry_after_s,
        )


def retry_after_seconds(headers: Any) -> float | None:
    """The ``retry-after`` (or ``retry-after-ms``) header in seconds, if present."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            continue  # an HTTP date: rare from these APIs; fall back to backoff
    return None


def status_kind(status: int) -> ErrorKind:
    """The error kind of an HTTP status."""
    if status == 429:
        return "rate_limit"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server"
    if status in (401, 403):
        return "auth"
    if status == 408:
        return "timeout"
    return "bad_request"


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a plain chat conversation."""

    role: Literal["system", "user", "assistant"]
    content: str


class LlmSource(Protocol):
    """Streams a reply's text for a conversation.

    ``await source.start()`` once per session (loads the model), then one
    ``stream`` per turn, then ``aclose()``. ``stream`` yields text deltas as the
    model produces them; cancelling the consumer stops generation promptly (within
    one token) and leaves the source usable for the next turn.
    """

    name: str
    mode: Literal["prefill", "chat"]  # how its text is parsed downstream

    async def start(self) -> None: ...

    def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class TokenCountingSource(LlmSource, Protocol):
    """An ``LlmSource`` that counts a conversation's prompt tokens with the model's
    own tokenizer (the embedded model): long sessions are trimmed to fit exactly."""

    @property
    def context_tokens(self) -> int:
        """The most tokens a prompt may hold (the context less room for the reply)."""
        ...

    async def count_tokens(self, messages: Sequence[ChatMessage]) -> int: ...


# --------------------------------------------------------------------------- provider output

NativeType: TypeAlias = Literal["text", "thinking", "tool_call"]

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


@dataclass(frozen=True, slots=True)
class NativeDelta:
    """Text, thinking text, or a fragment of a tool call's JSON input."""

    text: str


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
    TextDelta | NativeStart | NativeDelta | StrayDelta | NativeStop | Usage | StopInfo
)


def clean_output(output: ProviderOutput) -> ProviderOutput:
    """``output`` with every lone surrogate in its text replaced by U+FFFD (see
    ``surrogates``); ``output`` itself when it has none."""
    if isinstance(output, TextDelta | NativeDelta | StrayDelta):  # the hot path: one check
        if not has_surrogates(output.text):
            return output
        _log.warning("lone surrogate in model output replaced with U+FFFD")
        return replace(output, text=replace_surrogates(output.text))
    changes: dict[str, Any] = {}
    for name in ("tool_id", "tool_name", "redacted_data", "signature", "stop_sequence", "raw"):
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


class Provider(Protocol):
    """An LLM API behind one interface.

    ``stream(built, config)`` sends one formatted request and yields its output
    as it arrives; with ``streaming=False`` it makes a non-streaming call and
    yields the same kinds of item, each block whole. Errors are raised as
    ``ProviderError``. Closing the generator closes the HTTP stream at once.
    The SDK's own retries are off: ``Membrane`` holds the one retry policy.
    """

    name: str

    async def start(self) -> None: ...

    def stream(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> AsyncGenerator[ProviderOutput, None]: ...

    async def aclose(self) -> None: ...

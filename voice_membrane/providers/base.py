"""The interfaces of LLM providers.

Two kinds of source feed a reply:

- ``LlmSource`` (embedded model, recordings): streams text for a plain chat
  conversation; the text is parsed as prefill-mode output.
- ``Provider`` (Anthropic, OpenAI, Gemini over their SDKs, and the embedded
  sources through ``TextSourceProvider``): takes a formatted request
  (``formats.BuiltRequest``) and streams ``ProviderOutput`` items (the
  vocabulary of ``provider_output``, which the parsers read without depending
  on this layer). ``Membrane`` turns them into the one event vocabulary.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

from ..provider_output import ProviderOutput
from ..redact import redact

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
    one token) and leaves the source usable for the next turn. A source that
    computes on this machine (an embedded model) also says ``local = True``: it
    competes with a local voice for the CPU (``pipeline/scheduling.py``).
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

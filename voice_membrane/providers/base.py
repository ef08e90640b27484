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
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from ..vocab.provider_output import ProviderOutput

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..vocab.messages import ModelConfig

_log = logging.getLogger("voice_membrane.providers")


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

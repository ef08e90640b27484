"""The interface of an LLM source as the pipeline sees it."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol


class LlmError(RuntimeError):
    """The model could not be loaded or failed while generating."""


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

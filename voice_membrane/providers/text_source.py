"""The embedded sources (local model, recordings) as a ``Provider``.

``TextSourceProvider`` lets a ``Membrane`` drive an ``LlmSource``: the built
request's text messages become a plain chat conversation, and the source's text
comes back as ``TextDelta`` items, which the membrane reads with the XML parser
(so thinking or tool calls a small model writes are still never spoken).
Images, thinking and tool blocks in the history are left out: these sources
take text only.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING

from ..messages import TextContent, ToolResultContent
from ..provider_output import ProviderOutput, StopInfo, TextDelta
from .base import ChatMessage, LlmSource

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..messages import ModelConfig


class TextSourceProvider:
    def __init__(self, source: LlmSource) -> None:
        self.source = source
        self.name = source.name

    async def start(self) -> None:
        await self.source.start()

    async def aclose(self) -> None:
        await self.source.aclose()

    async def stream(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> AsyncGenerator[ProviderOutput, None]:
        async with aclosing(self.source.stream(chat_messages(built))) as deltas:
            async for text in deltas:
                yield TextDelta(text)
        yield StopInfo("end_turn")


def chat_messages(built: BuiltRequest) -> list[ChatMessage]:
    """The request as plain chat messages (text only; a prefill continues as the
    last assistant message)."""
    messages = [ChatMessage("system", built.system)] if built.system else []
    for message in built.messages:
        parts: list[str] = []
        for block in message.content:
            if isinstance(block, TextContent):
                parts.append(block.text)
            elif isinstance(block, ToolResultContent):
                parts.append(block.text())
        text = "".join(parts)
        if text:
            messages.append(ChatMessage(message.role, text))
    if built.prefill:
        messages.append(ChatMessage("assistant", built.prefill))
    return messages

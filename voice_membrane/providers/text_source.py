"""The embedded sources (local model, recordings) as a ``Provider``.

``TextSourceProvider`` lets a ``Membrane`` drive an ``LlmSource``: the built
request's text messages become a plain chat conversation, and the source's text
comes back as ``TextDelta`` items, which the membrane reads with the XML parser
(so thinking or tool calls a small model writes are still never spoken).
Images, thinking and tool blocks in the history are left out: these sources
take text only.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..formats.inert import neutralise_control
from ..vocab.messages import TextContent, ToolDefinition, ToolResultContent, ToolUseContent
from ..vocab.provider_output import ProviderOutput, StopInfo, TextDelta
from .base import ChatMessage, LlmSource

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..vocab.messages import ModelConfig


_TAG_IN_JSON = re.compile(r"<(?=/?tool_(?:call|result))", re.IGNORECASE)


class TextSourceProvider:
    def __init__(self, source: LlmSource) -> None:
        self.source = source
        self.name = source.name
        # An embedded model competes with a local voice for the CPU (first-audio priority).
        self.local: bool = getattr(source, "local", False)

    async def start(self) -> None:
        await self.source.start()

    async def aclose(self) -> None:
        await self.source.aclose()

    def request_body(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> dict[str, Any]:
        """What ``stream`` gives the source: the conversation as chat messages."""
        return {"messages": [asdict(message) for message in chat_messages(built)]}

    async def stream(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> AsyncGenerator[ProviderOutput, None]:
        async with aclosing(self.source.stream(chat_messages(built))) as deltas:
            async for text in deltas:
                yield TextDelta(text)
        # A source that knows why it stopped says so (the embedded model: its token
        # budget); otherwise the reply ended on its own.
        reason = getattr(self.source, "stop_reason", None)
        yield StopInfo("max_tokens" if reason == "max_tokens" else "end_turn")


def chat_messages(built: BuiltRequest) -> list[ChatMessage]:
    """The request as plain chat messages (text only; a prefill continues as the
    last assistant message). These sources have no native tools: tools sent
    natively are described in the system prompt, with the one way to call them a
    text model can (a JSON call in ``<tool_call>`` tags, which the reply's JSON
    tool reader takes out), and the history's calls and results are written the
    same way, so the model sees what it did. Text and tool results are written
    with their ``<tool_call>`` / ``<tool_result>`` tags and control tokens inert
    (``formats.inert``): nothing in them can close a result early or forge a
    call or a result the model is told to trust."""
    system = built.system or ""
    if built.tools:
        system = (system + "\n\n" if system else "") + tools_prompt(built.tools)
    messages = [ChatMessage("system", system)] if system else []
    for message in built.messages:
        parts: list[str] = []
        for block in message.content:
            if isinstance(block, TextContent):
                parts.append(neutralise_control(block.text))
            elif isinstance(block, ToolUseContent):
                call = {"name": block.name, "arguments": block.input}
                # "<" of a tool tag (only ever inside a JSON string) as "\u003c": still
                # the same JSON, and the call's own text can neither end it nor open a result.
                body = _TAG_IN_JSON.sub(r"\\u003c", json.dumps(call, ensure_ascii=False))
                parts.append(f"<tool_call>{body}</tool_call>")
            elif isinstance(block, ToolResultContent):
                failed = " (error)" if block.is_error else ""
                text = neutralise_control(block.text())
                parts.append(f"<tool_result{failed}>{text}</tool_result>")
        text = "".join(parts)
        if text:
            messages.append(ChatMessage(message.role, text))
    if built.prefill:
        messages.append(ChatMessage("assistant", built.prefill))
    return messages


def tools_prompt(tools: Sequence[ToolDefinition]) -> str:
    """The tools, and how to call one, for a model that only writes text."""
    lines = [
        "You can call these tools. To call one, write only this, then stop:",
        '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>',
        "The result comes back in <tool_result> tags. Tools:",
    ]
    for tool in tools:
        schema = json.dumps(tool.input_schema.get("properties", {}), ensure_ascii=False)
        lines.append(f"- {tool.name}: {tool.description or ''} Arguments: {schema}".rstrip())
    return "\n".join(lines)

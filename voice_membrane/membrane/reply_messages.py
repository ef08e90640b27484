"""A reply's completed blocks as messages: the history it leaves, and the
request that continues it after a tool round.

``conversation`` gives ``ReplyResult.messages``; ``with_chat_results``,
``with_native_results`` and ``continued_prefill`` write a tool round back —
chat: native tool_use / tool_result messages; prefill with native calls: the
transcript so far as an assistant turn, the results as a user message; prefill:
text appended to the open turn. Pure functions of blocks and requests, apart
from the loop that decides when to call them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..formats.base import BuiltRequest, ProviderMessage
from ..vocab.events import Block
from ..vocab.messages import (
    ContentBlock,
    GeneratedImageContent,
    Message,
    RedactedThinkingContent,
    Request,
    TextContent,
    ThinkingContent,
    ToolResultContent,
    ToolUseContent,
)
from .images import for_history


def conversation(blocks: Sequence[Block], assistant: str, human: str) -> list[Message]:
    """A reply's blocks as messages to append to the conversation, the same in both
    modes: the assistant's content (text, thinking, tool uses) and, after each
    round of calls, a message from ``human`` with the results."""
    messages: list[Message] = []
    said: list[ContentBlock] = []
    results: list[ContentBlock] = []
    for block in blocks:
        if block.type == "tool_result":
            if said:
                messages.append(Message(participant=assistant, content=said))
                said = []
            if block.tool_id:  # a result that answers no call cannot be sent back
                results.append(
                    ToolResultContent(
                        tool_use_id=block.tool_id,
                        content=block.content or "",
                        is_error=block.is_error,
                    )
                )
            continue
        if results:
            messages.append(Message(participant=human, content=results))
            results = []
        content = content_of(block)
        if content is not None:
            said.append(content)
    if said:
        messages.append(Message(participant=assistant, content=said))
    if results:
        messages.append(Message(participant=human, content=results))
    return messages


def with_chat_results(
    request: Request, blocks: Sequence[Block], results: list[ToolResultContent]
) -> Request:
    """Chat mode: ``request`` continued by the round's assistant turn (``blocks``)
    and a message with the results."""
    # A generated image is not sent back within the reply: the tool's result
    # says it was made, and megabytes of base64 would only cost tokens.
    content = [
        c
        for b in blocks
        if (c := content_of(b)) is not None and not isinstance(c, GeneratedImageContent)
    ]
    if not request.options.convert_unsigned_thinking_to_text:
        # Unsigned thinking (OpenAI-compatible reasoning) cannot go back as
        # thinking: the formatter would refuse the continuation mid-reply.
        content = [c for c in content if not _unsigned_thinking(c)]
    assistant = Message(participant=request.options.assistant_participant, content=content)
    results_message = Message(participant=request.options.human_participant, content=list(results))
    return request.model_copy(update={"messages": [*request.messages, assistant, results_message]})


def with_native_results(
    built: BuiltRequest,
    raw: str,
    native_calls: Sequence[Block],
    results: list[ToolResultContent],
) -> BuiltRequest:
    """Native tool calls in a prefill format: the API wants the results as a
    user message after the assistant's turn, so the transcript so far (``raw``
    after the prefill) becomes that turn, with its native calls, and the model
    answers in a new one."""
    written = ((built.prefill or "") + raw).rstrip()
    turn: list[ContentBlock] = [TextContent(text=written)] if written else []
    turn += [c for b in native_calls if (c := content_of(b)) is not None]
    return replace(
        built,
        messages=[
            *built.messages,
            ProviderMessage("assistant", turn),
            ProviderMessage("user", list(results)),
        ],
        prefill=None,
        prompt=None,
    )


def continued_prefill(built: BuiltRequest, appended: str) -> BuiltRequest:
    """Prefill: the open turn (and the prompt, for completion endpoints) goes on
    with ``appended``."""
    return replace(
        built,
        prefill=(built.prefill or "") + appended,
        prompt=None if built.prompt is None else built.prompt + appended,
    )


def content_of(block: Block) -> ContentBlock | None:
    """A completed chat-mode block as content for the next request."""
    if block.type == "text":
        return TextContent(text=block.content or "")
    if block.type == "image":  # a stored image by its blob id alone
        return for_history(block.image) if block.image is not None else None
    if block.type == "thinking":
        if block.redacted_data is not None:
            return RedactedThinkingContent(data=block.redacted_data)
        return ThinkingContent(thinking=block.content or "", signature=block.signature)
    if block.type == "tool_call":
        if not block.tool_name or not block.tool_id:
            return None  # stray text, or a call with no name: it cannot be sent back
        return ToolUseContent(
            id=block.tool_id or "",
            name=block.tool_name or "",
            input=dict(block.input or {}),
            signature=block.signature,
        )
    return None  # tool results are sent as their own message


def _unsigned_thinking(content: ContentBlock) -> bool:
    return isinstance(content, ThinkingContent) and content.signature is None

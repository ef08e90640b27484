"""NativeFormatter: the conversation in the provider's own roles and blocks (chat mode).

The assistant participant's messages are ``assistant`` turns, everyone else's
``user`` turns; consecutive turns of one role are merged (APIs want them to
alternate), a blank line between the text that ends one and the text that
starts the next, so two user messages in a row (the first never answered) are
never glued into one sentence. Tools, thinking, tool calls and results travel
as native blocks, which each provider adapter writes in its own wire shape.
Text and tool results are written inert as in the prefill formats
(``inert.py``): no model family's control token (a server that reads special
tokens in chat content would make them real) and no line that starts like a
speaker's turn. In ``"multiuser"``
mode a user message's first text block starts with ``"Name: "``, so the model
still knows who spoke.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from ..parse import XmlStreamParser
from ..vocab.messages import (
    ContentBlock,
    Message,
    Request,
    RequestError,
    TextContent,
    ThinkingContent,
    ToolResultContent,
)
from . import _xml
from .base import BuiltRequest, ProviderMessage
from .inert import TurnLines, neutralise_control, request_speakers
from .participants import ParticipantNames, SuppressionPredicate, check_written_names, dedupe


class NativeFormatter:
    """Chat-mode format: native roles, native tools, the caller's stop sequences only.

    Args:
        suppression: an extra rule for leaving out multiuser ``Name:`` prefixes.
    """

    name = "native"
    mode: Literal["prefill", "chat"] = "chat"

    def __init__(self, suppression: SuppressionPredicate | None = None) -> None:
        self.suppression = suppression

    def build(self, request: Request) -> BuiltRequest:
        options = request.options
        names = ParticipantNames(options, self.suppression)
        if options.participant_mode == "multiuser":
            check_written_names(request, names, assistant=False)
        messages: list[ProviderMessage] = []
        previous: Message | None = None
        turn_lines = TurnLines(request_speakers(request))

        def written(text: str) -> str:
            return turn_lines(neutralise_control(text))

        for m, message in enumerate(request.messages):
            role: Literal["user", "assistant"] = (
                "assistant" if names.is_assistant(message) else "user"
            )
            prefix = ""
            if role == "user" and options.participant_mode == "multiuser":
                prefix = names.prefix(message, previous)
            content = self._content(request, message, m, prefix, written)
            previous = message
            if not content:
                continue
            if messages and messages[-1].role == role:
                messages[-1] = ProviderMessage(role, joined(messages[-1].content, content))
            else:
                messages.append(ProviderMessage(role, content))
        system = request.system_prompt
        return BuiltRequest(
            mode="chat",
            messages=messages,
            system=system,
            stop_sequences=dedupe(request.stop_sequences),
            tools=list(request.tools) or None,
            system_cache=options.prompt_caching and system is not None,
            params=dict(options.provider_params),
        )

    def create_parser(self, prefill: str = "") -> XmlStreamParser | None:
        return None

    def format_tool_results(
        self, results: Sequence[ToolResultContent], request: Request | None = None
    ) -> str:
        return ""

    @staticmethod
    def _result(block: ToolResultContent, written: Callable[[str], str]) -> ToolResultContent:
        if isinstance(block.content, str):
            text = written(block.content)
            return block if text == block.content else block.model_copy(update={"content": text})
        parts = [
            part.model_copy(update={"text": written(part.text)})
            if isinstance(part, TextContent)
            else part
            for part in block.content
        ]
        return block.model_copy(update={"content": parts})

    def _content(
        self,
        request: Request,
        message: Message,
        m: int,
        prefix: str,
        written: Callable[[str], str],
    ) -> list[ContentBlock]:
        """The message's blocks: name prefix, unsigned thinking, cache breakpoints."""
        options = request.options
        caching = options.prompt_caching
        out: list[ContentBlock] = []
        for c, block in enumerate(message.content):
            if isinstance(block, ThinkingContent) and block.signature is None:
                if not options.convert_unsigned_thinking_to_text:
                    raise RequestError(
                        f"messages[{m}].content[{c}]: unsigned thinking block (no signature) "
                        "cannot be sent back as thinking; set "
                        "options.convert_unsigned_thinking_to_text=True to send it as "
                        "<thinking> text"
                    )
                block = TextContent(text=_xml.thinking(block.thinking))
            if isinstance(block, ToolResultContent):
                block = self._result(block, written)
            if isinstance(block, TextContent):
                text = written(block.text)
                if text != block.text:
                    block = block.model_copy(update={"text": text})
                if prefix:
                    block = block.model_copy(update={"text": prefix + block.text})
                    prefix = ""
                if not caching and block.cache_control is not None:
                    block = block.model_copy(update={"cache_control": None})
            out.append(block)
        if caching and message.cache_control is not None:
            # The breakpoint goes on the message's last text block (only text
            # blocks carry one here); with no text it is dropped.
            for n in range(len(out) - 1, -1, -1):
                block = out[n]
                if isinstance(block, TextContent):
                    out[n] = block.model_copy(update={"cache_control": message.cache_control})
                    break
        return out


MESSAGE_SEPARATOR = "\n\n"


def joined(before: list[ContentBlock], after: list[ContentBlock]) -> list[ContentBlock]:
    """Two messages' blocks as one message's. Text that ends one and text that starts
    the other are kept apart by a blank line: a provider may write text blocks
    back to back (OpenAI's string content, a text model's one message), and
    "What is the weather?" then "And tomorrow?" must not read as one sentence."""
    if before and after and isinstance(before[-1], TextContent):
        first = after[0]
        if isinstance(first, TextContent):
            after = [first.model_copy(update={"text": MESSAGE_SEPARATOR + first.text}), *after[1:]]
    return [*before, *after]

"""AnthropicXmlFormatter: the conversation as one prefilled assistant turn.

The model continues a transcript of ``Name: text`` turns separated by blank
lines, ending in ``"{assistant}:"``; its thinking and tool calls are XML in its
text, read back by ``XmlStreamParser``::

    system:    (system prompt; in xml tool mode + the tools as <functions>)
    user:      [conversation follows]        (or options.context_prefix)
    assistant: Alice: Hi

               Bob: What's the weather?

               Claude:

Images cannot stand in an assistant turn: the transcript is cut there and the
image goes in a user message between the two assistant parts. A cache
breakpoint (``cache_control``) cuts the transcript into a separate text block
carrying it. Everything after the last cut is the ``prefill``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..parse import XmlStreamParser
from ..vocab.messages import CacheControl, ContentBlock, Request, TextContent, ToolResultContent
from . import _xml
from ._transcript import (
    PLACEHOLDER_USER_TEXT,
    CacheMark,
    ImagePart,
    Part,
    Transcript,
    join_sections,
    lead_message,
    thinking_cue,
)
from .base import BuiltRequest, ProviderMessage
from .participants import (
    ParticipantNames,
    SuppressionPredicate,
    check_written_names,
    stop_sequences,
)


class AnthropicXmlFormatter:
    """Prefill format with Anthropic-style XML for thinking and tools.

    Args:
        tool_mode: ``"xml"`` — tools described in the system prompt, called as
            ``<function_calls>`` (stop sequence ``</function_calls>``);
            ``"native"`` — tools sent through the API's tool parameter.
        suppression: an extra rule for leaving out ``Name:`` prefixes.
        placeholder: the user message's text when there is no context prefix.
    """

    name = "anthropic-xml"
    mode: Literal["prefill", "chat"] = "prefill"

    def __init__(
        self,
        tool_mode: Literal["xml", "native"] = "xml",
        suppression: SuppressionPredicate | None = None,
        placeholder: str = PLACEHOLDER_USER_TEXT,
    ) -> None:
        if tool_mode not in ("xml", "native"):
            raise ValueError(f"tool_mode must be 'xml' or 'native', not {tool_mode!r}")
        self.tool_mode = tool_mode
        self.suppression = suppression
        self.placeholder = placeholder

    def build(self, request: Request) -> BuiltRequest:
        options = request.options
        names = ParticipantNames(options, self.suppression)
        check_written_names(request, names)
        transcript = Transcript(request, names)
        parts: list[Part] = []
        for n, turn in enumerate(transcript.turns):
            parts += ["\n\n" if n else "", turn.prefix, *turn.parts]
        cue = thinking_cue(request)
        if not transcript.continues:
            parts.append(f"\n\n{names.assistant}:" + (f" {cue}" if cue else ""))
        messages, prefill = _split(parts, lead_message(options, self.placeholder))
        xml_tools = self.tool_mode == "xml" and bool(request.tools)
        system = (
            _xml.system_with_tools(request.system_prompt, request.tools)
            if self.tool_mode == "xml"
            else request.system_prompt
        )
        text = "".join(part for part in parts if isinstance(part, str))
        return BuiltRequest(
            mode="prefill",
            messages=messages,
            system=system,
            prefill=prefill,
            open_turn=transcript.open_turn(cue),
            prompt=join_sections(system, options.context_prefix, text.strip()),
            stop_sequences=stop_sequences(
                request, names, leading=[_xml.FUNCTION_CALLS_END] if xml_tools else []
            ),
            tools=list(request.tools) if self.tool_mode == "native" and request.tools else None,
            system_cache=options.prompt_caching and system is not None,
            params=dict(options.provider_params),
        )

    def create_parser(self, prefill: str = "") -> XmlStreamParser:
        return XmlStreamParser(prefill)

    def format_tool_results(
        self, results: Sequence[ToolResultContent], request: Request | None = None
    ) -> str:
        return _xml.format_tool_results(results, request)


def _split(parts: Sequence[Part], lead: ProviderMessage) -> tuple[list[ProviderMessage], str]:
    """Cut the transcript at images and cache breakpoints: the messages before the
    last cut, and the text after it (the prefill). No text block ends in
    whitespace: it moves to the start of the next."""
    messages = [lead]
    blocks: list[ContentBlock] = []  # the assistant message being built
    buffer: list[str] = []

    def cut(cache_control: CacheControl | None) -> None:
        text = "".join(buffer)
        body = text.rstrip()
        buffer[:] = [text[len(body) :]]
        if body:
            blocks.append(TextContent(text=body, cache_control=cache_control))
        elif cache_control is not None:
            _mark_last_text(blocks, messages, cache_control)

    def add(role: Literal["user", "assistant"], content: list[ContentBlock]) -> None:
        if messages[-1].role == role:
            messages[-1] = ProviderMessage(role, [*messages[-1].content, *content])
        else:
            messages.append(ProviderMessage(role, content))

    for part in parts:
        if isinstance(part, str):
            buffer.append(part)
        elif isinstance(part, CacheMark):
            cut(part.cache_control)
        elif isinstance(part, ImagePart):
            cut(None)
            if blocks:
                add("assistant", list(blocks))
                blocks.clear()
            add("user", [part.image])
    if blocks:
        add("assistant", blocks)
    return messages, "".join(buffer).rstrip()


def _mark_last_text(
    blocks: list[ContentBlock], messages: list[ProviderMessage], cache_control: CacheControl
) -> None:
    """A breakpoint right after an image (which carries none here): it goes on the
    last text block before it, which caches a little less but keeps the breakpoint."""
    for n in range(len(blocks) - 1, -1, -1):
        block = blocks[n]
        if isinstance(block, TextContent):
            blocks[n] = block.model_copy(update={"cache_control": cache_control})
            return
    for m in range(len(messages) - 1, -1, -1):
        content = messages[m].content
        for n in range(len(content) - 1, -1, -1):
            block = content[n]
            if isinstance(block, TextContent):
                content[n] = block.model_copy(update={"cache_control": cache_control})
                return

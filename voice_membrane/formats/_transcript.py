"""A request's messages as turns of text, for the prefill formatters.

Each message's blocks are written as the model itself would write them: text as
it is, thinking as ``<thinking>``, tool calls and results as XML (``_xml``).
Images and cache breakpoints stay separate parts, for the formatter to place
(Anthropic) or refuse (text-only formats).

Text from anyone but the assistant is written inert: tag text, control tokens
and the format's own turn tokens in it cannot open a block, forge a tool call or
end a turn (``_xml.neutralise``). In every message and tool result, a line that
starts like a turn (``Claude:``, a speaker's or a role's name and the format's
separator, after any line break) has its separator written ``∶`` (U+2236), so
it cannot pass for one (``inert.TurnLines``).

A message holding only tool results joins the turn before it, and a message
from that turn's speaker right after the results continues it — the turn reads
as one stretch of output, as in prefill mode itself. When the last turn is the
assistant's and ends with results, the reply continues it (``continues``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from ..vocab.messages import (
    Base64Source,
    CacheControl,
    GeneratedImageContent,
    ImageContent,
    Message,
    Request,
    RequestError,
    RequestOptions,
    TextContent,
    ThinkingContent,
    ToolResultContent,
    ToolUseContent,
)
from . import _xml
from .base import ProviderMessage
from .inert import TurnLines, request_speakers
from .participants import NAME_FORMAT, ParticipantNames, results_only


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image in the transcript and the field it came from."""

    image: ImageContent
    where: str


@dataclass(frozen=True, slots=True)
class CacheMark:
    """A prompt-cache breakpoint: cache everything before this point."""

    cache_control: CacheControl


Part: TypeAlias = str | ImagePart | CacheMark

PLACEHOLDER_USER_TEXT = "[conversation follows]"
"""The user message before a prefill when ``options.context_prefix`` is unset:
chat APIs (Anthropic, Gemini) need a user turn before the assistant's."""


@dataclass(slots=True)
class Turn:
    """One speaker's stretch of the transcript: the opening message and what joined it."""

    message: Message
    is_assistant: bool
    prefix: str  # "Name: ", or "" when suppressed
    items: list[tuple[bool, Part]] = field(default_factory=list)  # (is XML, part)
    ends_with_results: bool = False

    @property
    def parts(self) -> list[Part]:
        """The body; XML blocks are set off from their neighbours by a newline."""
        out: list[Part] = []
        last: bool | None = None  # whether the last text part was XML
        for is_xml, part in self.items:
            if isinstance(part, str):
                if last is not None and (last or is_xml):
                    out.append("\n")
                last = is_xml
            out.append(part)
        return out


class Transcript:
    """The turns of ``request`` (see the module docstring).

    Args:
        request: the request.
        names: who is written under which name, and when names are left out.
        name_format: the prefix format (``"{name}: "``).
        tokens: the format's own structural tokens (``<|im_end|>``), made inert
            in non-assistant text.
        roles: the role names the format writes (chatml's ``user``), speakers too.
    """

    def __init__(
        self,
        request: Request,
        names: ParticipantNames,
        name_format: str = NAME_FORMAT,
        tokens: Sequence[str] = (),
        roles: Sequence[str] = (),
    ) -> None:
        self.caching = request.options.prompt_caching
        self.tokens = tuple(tokens)
        speakers = {*request_speakers(request), *(names.display(m) for m in request.messages)}
        self.turn_lines = TurnLines({*speakers, *roles}, name_format)
        self.result_text = _xml.result_writer(request, name_format, self.tokens)
        self.turns: list[Turn] = []
        for m, message in enumerate(request.messages):
            items = self._render(message, m, inert=not names.is_assistant(message))
            joins = results_only(message)
            last = self.turns[-1] if self.turns else None
            if last is not None and (
                joins
                or (last.ends_with_results and last.message.participant == message.participant)
            ):
                last.items += items
                last.ends_with_results = joins
                continue
            previous = last.message if last is not None else None
            self.turns.append(
                Turn(
                    message,
                    names.is_assistant(message),
                    names.prefix(message, previous, name_format),
                    items,
                )
            )

    @property
    def continues(self) -> bool:
        """The last turn is the assistant's, after tool results: the reply goes on
        in it rather than in a new turn."""
        return bool(self.turns) and self.turns[-1].is_assistant and self.turns[-1].ends_with_results

    def open_turn(self, cue: str) -> str:
        """The text of the assistant turn the reply continues, after its ``Name:``:
        the continued turn's body, or ``cue`` for a new turn (what seeds the reply's
        parser: ``BuiltRequest.open_turn``)."""
        if not self.continues:
            return cue
        return "".join(part for part in self.turns[-1].parts if isinstance(part, str))

    def _inert(self, text: str) -> str:
        return self.turn_lines(_xml.neutralise(text, self.tokens))

    def _as_said(self, text: str) -> str:
        """The assistant's own text: its tags kept, but no control token or turn line."""
        return self.turn_lines(_xml.neutralise(text, self.tokens, tags=False))

    def _render(self, message: Message, m: int, inert: bool) -> list[tuple[bool, Part]]:
        written = self._inert if inert else self._as_said
        items: list[tuple[bool, Part]] = []
        calls: list[tuple[ToolUseContent, str]] = []
        results: list[tuple[ToolResultContent, str]] = []
        result_images: list[ImagePart] = []

        def settle() -> None:
            if calls:
                items.append((True, _xml.tool_calls(calls)))
                calls.clear()
            if results:
                items.append((True, _xml.tool_results(results, self.result_text)))
                items.extend((False, image) for image in result_images)
                results.clear()
                result_images.clear()

        for c, block in enumerate(message.content):
            where = f"messages[{m}].content[{c}]"
            if isinstance(block, ToolUseContent):
                if results:
                    settle()
                calls.append((block, where))
                continue
            if isinstance(block, ToolResultContent):
                if calls:
                    settle()
                results.append((block, where))
                if not isinstance(block.content, str):
                    result_images += [
                        ImagePart(part, f"{where}.content[{k}]")
                        for k, part in enumerate(block.content)
                        if isinstance(part, ImageContent)
                    ]
                continue
            settle()
            if isinstance(block, TextContent):
                items.append((False, written(block.text)))
                if self.caching and block.cache_control is not None:
                    items.append((False, CacheMark(block.cache_control)))
            elif isinstance(block, ImageContent):
                items.append((False, ImagePart(block, where)))
            elif isinstance(block, GeneratedImageContent):
                source = Base64Source(media_type=block.mime_type, data=block.base64_data(where))
                items.append((False, ImagePart(ImageContent(source=source), where)))
            elif isinstance(block, ThinkingContent):
                items.append((True, _xml.thinking(written(block.thinking))))
            # Redacted thinking has no text to write: it is left out.
        settle()
        if self.caching and message.cache_control is not None:
            items.append((False, CacheMark(message.cache_control)))
        return items


def thinking_cue(request: Request) -> str:
    """``<thinking>`` when the request asks for thinking: a prefill reply then starts
    inside thinking (the parser, seeded with the prefill, reads it so)."""
    return "<thinking>" if request.config.thinking_budget is not None else ""


def lead_message(options: RequestOptions, placeholder: str) -> ProviderMessage:
    """The user message before a prefill: the context prefix, or the placeholder."""
    return ProviderMessage("user", [TextContent(text=options.context_prefix or placeholder)])


def text_only(parts: Sequence[Part], policy: Literal["error", "strip"], fmt: str) -> str:
    """The parts as one text, for a format that cannot carry images: an image is a
    ``RequestError`` naming its field, or (``"strip"``) left out with a warning.
    Cache breakpoints are dropped."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, ImagePart):
            if policy == "error":
                raise RequestError(
                    f"{part.where}: the {fmt} format cannot carry images; set "
                    "options.unsupported_media='strip' to leave them out"
                )
            warnings.warn(f"{fmt}: left out the image at {part.where}", UserWarning, stacklevel=3)
    return "".join(out)


def join_sections(*sections: str | None) -> str:
    """Non-empty sections separated by a blank line (system, context, transcript)."""
    return "\n\n".join(section for section in sections if section)

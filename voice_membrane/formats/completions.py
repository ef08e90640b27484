"""CompletionsFormatter: a plain-text transcript for base models (completion endpoints).

Each message is ``Name: text`` followed by an end-of-turn token, messages are
joined by a separator, and the text ends with the assistant's name for the
model to continue::

    Alice: Hi<|eot|>

    Bob: What's up?<|eot|>

    Claude:

Base models get no tools (a request with tools is refused) and no images
(``options.unsupported_media``: refused, or left out with a warning). Past
thinking and tool blocks are still written as XML text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..parse import XmlStreamParser
from ..vocab.messages import Request, RequestError, ToolResultContent
from . import _xml
from ._transcript import (
    PLACEHOLDER_USER_TEXT,
    Part,
    Transcript,
    join_sections,
    lead_message,
    text_only,
    thinking_cue,
)
from .base import BuiltRequest
from .participants import (
    NAME_FORMAT,
    ParticipantNames,
    SuppressionPredicate,
    check_written_names,
    stop_sequences,
)


class CompletionsFormatter:
    """Prefill format for base models.

    Args:
        eot_token: written after each message; also a stop sequence.
        name_format: the ``Name:`` prefix, with ``{name}``.
        message_separator: between messages.
        suppression: an extra rule for leaving out ``Name:`` prefixes.
        placeholder: the user message's text (chat APIs) when there is no
            context prefix.
    """

    name = "completions"
    mode: Literal["prefill", "chat"] = "prefill"
    end_of_turn: str | None = None  # set by formats whose provider strips the token

    def __init__(
        self,
        eot_token: str = "<|eot|>",
        name_format: str = NAME_FORMAT,
        message_separator: str = "\n\n",
        suppression: SuppressionPredicate | None = None,
        placeholder: str = PLACEHOLDER_USER_TEXT,
    ) -> None:
        if "{name}" not in name_format:
            raise ValueError(f"name_format must contain {{name}}: {name_format!r}")
        self.eot_token = eot_token
        self.name_format = name_format
        self.message_separator = message_separator
        self.suppression = suppression
        self.placeholder = placeholder

    def build(self, request: Request) -> BuiltRequest:
        if request.tools:
            raise RequestError(f"tools: the {self.name} format does not support tools")
        options = request.options
        names = ParticipantNames(options, self.suppression)
        check_written_names(request, names, self.name_format)
        tokens = [self.eot_token] if self.eot_token else []
        transcript = Transcript(request, names, self.name_format, tokens)
        parts: list[Part] = []
        for n, turn in enumerate(transcript.turns):
            parts += [self.message_separator if n else "", turn.prefix, *turn.parts]
            if not (transcript.continues and n == len(transcript.turns) - 1):
                parts.append(self.eot_token)
        thinking = thinking_cue(request)
        if not transcript.continues:
            cue = self.name_format.format(name=names.assistant).rstrip()
            parts += [self.message_separator, f"{cue} {thinking}" if thinking else cue]
        prefill = text_only(parts, options.unsupported_media, self.name).rstrip()
        return BuiltRequest(
            mode="prefill",
            messages=[lead_message(options, self.placeholder)],
            system=request.system_prompt,
            prefill=prefill,
            open_turn=transcript.open_turn(thinking),
            prompt=join_sections(request.system_prompt, options.context_prefix, prefill),
            stop_sequences=stop_sequences(
                request, names, leading=[self.eot_token] if self.eot_token else []
            ),
            end_of_turn=self.end_of_turn,
            params=dict(options.provider_params),
        )

    def create_parser(self, prefill: str = "") -> XmlStreamParser:
        return XmlStreamParser(prefill)

    def format_tool_results(
        self, results: Sequence[ToolResultContent], request: Request | None = None
    ) -> str:
        tokens = [self.eot_token] if self.eot_token else []
        return _xml.format_tool_results(results, request, self.name_format, tokens)

"""ChatMLFormatter: the conversation in a chat template, for local and Llama-style models.

Each turn is ``{start}{role}\\n{text}{end}\\n``; the prefill ends by opening the
assistant's turn, so the model writes its reply and closes it with the end token::

    <|im_start|>user
    Alice: Hi<|im_end|>
    <|im_start|>assistant
    Hello!<|im_end|>
    <|im_start|>user
    Bob: And me?<|im_end|>
    <|im_start|>assistant

In ``"multiuser"`` mode user turns start with ``Name: `` (the role says who the
assistant is). Thinking and tools are XML, as in ``anthropic-xml``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from ..parse import XmlStreamParser
from ..vocab.messages import Request, ToolResultContent
from . import _xml
from ._transcript import (
    PLACEHOLDER_USER_TEXT,
    Part,
    Transcript,
    lead_message,
    text_only,
    thinking_cue,
)
from .base import BuiltRequest
from .participants import (
    ParticipantNames,
    SuppressionPredicate,
    check_written_names,
    stop_sequences,
)

ROLE_NAMES: Mapping[str, str] = {"system": "system", "user": "user", "assistant": "assistant"}


class ChatMLFormatter:
    """Prefill format in a ChatML-style template with configurable tokens.

    Args:
        start_token: opens a turn, followed by the role name and a newline.
        end_token: closes a turn.
        role_names: the role names written for ``system``, ``user`` and ``assistant``.
        suppression: an extra rule for leaving out ``Name:`` prefixes.
        placeholder: the user message's text when there is no context prefix.
    """

    name = "chatml"
    mode: Literal["prefill", "chat"] = "prefill"

    def __init__(
        self,
        start_token: str = "<|im_start|>",
        end_token: str = "<|im_end|>",
        role_names: Mapping[str, str] = ROLE_NAMES,
        suppression: SuppressionPredicate | None = None,
        placeholder: str = PLACEHOLDER_USER_TEXT,
    ) -> None:
        missing = sorted(set(ROLE_NAMES) - set(role_names))
        if missing:
            raise ValueError(f"role_names lacks {', '.join(missing)}")
        if not start_token or not end_token:
            raise ValueError("start_token and end_token must not be empty")
        self.start_token, self.end_token = start_token, end_token
        self.role_names = dict(role_names)
        self.suppression = suppression
        self.placeholder = placeholder

    def _open(self, role: str) -> str:
        return f"{self.start_token}{self.role_names[role]}\n"

    def _turn(self, role: str, text: str) -> str:
        return f"{self._open(role)}{text}{self.end_token}\n"

    def build(self, request: Request) -> BuiltRequest:
        options = request.options
        names = ParticipantNames(options, self.suppression)
        multiuser = options.participant_mode == "multiuser"
        if multiuser:
            check_written_names(request, names, assistant=False)
        transcript = Transcript(
            request,
            names,
            tokens=(self.start_token, self.end_token),
            roles=list(self.role_names.values()),
        )
        parts: list[Part] = []
        for n, turn in enumerate(transcript.turns):
            role = "assistant" if turn.is_assistant else "user"
            prefix = turn.prefix if multiuser and not turn.is_assistant else ""
            parts += [self._open(role), prefix, *turn.parts]
            if not (transcript.continues and n == len(transcript.turns) - 1):
                parts.append(f"{self.end_token}\n")
        cue = thinking_cue(request)
        if not transcript.continues:
            parts += [self._open("assistant"), cue]
        prefill = text_only(parts, options.unsupported_media, self.name)
        system = _xml.system_with_tools(request.system_prompt, request.tools)
        header = [self._turn("system", system)] if system else []
        if options.context_prefix:
            header.append(self._turn("user", options.context_prefix))
        calls_end = [_xml.FUNCTION_CALLS_END] if request.tools else []
        leading = [self.end_token, *calls_end, self.start_token]
        return BuiltRequest(
            mode="prefill",
            messages=[lead_message(options, self.placeholder)],
            system=system,
            prefill=prefill,
            open_turn=transcript.open_turn(cue),
            prompt="".join(header) + prefill,
            stop_sequences=stop_sequences(request, names, leading=leading, participants=False),
            params=dict(options.provider_params),
        )

    def create_parser(self, prefill: str = "") -> XmlStreamParser:
        return XmlStreamParser(prefill)

    def format_tool_results(
        self, results: Sequence[ToolResultContent], request: Request | None = None
    ) -> str:
        tokens = (self.start_token, self.end_token)
        return _xml.format_tool_results(results, request, tokens=tokens)

"""Participant names in text transcripts: who is written, and where the model must stop.

Prefill formats write each turn as ``Name: text``. ``ParticipantNames`` decides
the name a message is written under (in ``"simple"`` mode every non-assistant
speaker is the ``human_participant``) and whether its ``Name:`` prefix is left
out (``ParticipantRules`` plus an optional predicate). ``stop_sequences`` builds
the stops that keep the model from writing the next speaker's turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

from ..infra.redact import quote
from ..vocab.messages import Message, Request, RequestError, RequestOptions, ToolResultContent

SuppressionPredicate: TypeAlias = Callable[[Message, Message | None, bool, bool], bool]
"""``(message, previous, is_consecutive, is_empty) -> suppress?``: ``previous`` is the
message that opened the previous turn (None for the first); its answer is OR-ed
with the ``ParticipantRules``."""

NAME_FORMAT = "{name}: "


def name_prefix(name: str, name_format: str = NAME_FORMAT) -> str:
    """The prefix a turn is written with (``"Alice: "`` by default)."""
    return name_format.format(name=name)


def dedupe(items: Iterable[str]) -> list[str]:
    """``items`` in order, each once, empty strings left out."""
    seen: dict[str, None] = {}
    for item in items:
        if item:
            seen.setdefault(item, None)
    return list(seen)


class ParticipantNames:
    """Names as a request's options say they are written.

    Args:
        options: the request's options (mode, assistant/human names, rules).
        predicate: an extra suppression rule (see ``SuppressionPredicate``).
    """

    def __init__(
        self, options: RequestOptions, predicate: SuppressionPredicate | None = None
    ) -> None:
        self.options = options
        self.rules = options.participant_rules
        self.predicate = predicate

    @property
    def assistant(self) -> str:
        return self.options.assistant_participant

    def is_assistant(self, message: Message) -> bool:
        return message.participant == self.options.assistant_participant

    def display(self, message: Message) -> str:
        """The name ``message`` is written under: itself in multiuser mode; in simple
        mode one of the two sides."""
        if self.options.participant_mode == "multiuser" or self.is_assistant(message):
            return message.participant
        return self.options.human_participant

    def suppressed(self, message: Message, previous: Message | None) -> bool:
        """Whether ``message``'s ``Name:`` prefix is left out."""
        name = self.display(message)
        is_empty = not name.strip()
        is_consecutive = previous is not None and self.display(previous) == name
        rules = self.rules
        if rules.suppress_empty_names and is_empty:
            return True
        if rules.suppress_consecutive_same_participant and is_consecutive:
            return True
        if name in rules.always_suppress or message.participant in rules.always_suppress:
            return True
        if self.predicate is not None:
            return self.predicate(message, previous, is_consecutive, is_empty)
        return False

    def prefix(
        self, message: Message, previous: Message | None, name_format: str = NAME_FORMAT
    ) -> str:
        """The prefix ``message`` is written with, ``""`` when suppressed."""
        if self.suppressed(message, previous):
            return ""
        return name_prefix(self.display(message), name_format)

    def recent_speakers(self, messages: Sequence[Message]) -> list[str]:
        """Distinct non-assistant names as written, most recent first, at most
        ``max_participants_for_stop`` (empty names and tool-result messages left out)."""
        limit = self.options.max_participants_for_stop
        names: list[str] = []
        for message in reversed(messages):
            if len(names) >= limit:
                break
            if self.is_assistant(message) or results_only(message):
                continue  # results join the turn before them: no name is written
            name = self.display(message)
            if name.strip() and name not in names:
                names.append(name)
        return names


def name_separator(name_format: str) -> str:
    """What ends a name in ``name_format`` (``":"`` for ``"{name}: "``), "" if nothing."""
    return name_format.split("{name}", 1)[-1].strip()


def check_written_names(
    request: Request,
    names: ParticipantNames,
    name_format: str = NAME_FORMAT,
    *,
    assistant: bool = True,
) -> None:
    """``RequestError`` for a name that would break the ``Name:`` lines it is
    written in: one holding the format's separator (``:`` in ``"{name}: "``)
    would let a name forge a turn. Checks every non-assistant name as written
    and, when the format writes it (``assistant``), the assistant's. (Line
    breaks and a user named like the assistant are refused for every format by
    ``validate_request``.)"""
    separator = name_separator(name_format)
    if not separator:
        return

    def check(name: str, where: str) -> None:
        if separator in name:
            raise RequestError(
                f"{where}: {quote(name)} contains {separator!r}, which ends a name in "
                "this format; choose a name without it"
            )

    options = request.options
    if assistant:
        check(options.assistant_participant, "options.assistant_participant")
    if options.participant_mode == "simple":
        check(options.human_participant, "options.human_participant")
        return
    for m, message in enumerate(request.messages):
        if not names.is_assistant(message):
            check(message.participant, f"messages[{m}].participant")


def results_only(message: Message) -> bool:
    """A message of tool results only: it joins the turn before it, unnamed."""
    return bool(message.content) and all(
        isinstance(block, ToolResultContent) for block in message.content
    )


def stop_sequences(
    request: Request,
    names: ParticipantNames | None = None,
    *,
    leading: Sequence[str] = (),
    participants: bool = True,
) -> list[str]:
    """All stops for a prefill call, deduplicated: the format's own (``leading``),
    then ``\\n{Name}:`` for the speakers the model must not impersonate, then the
    caller's ``request.stop_sequences``.

    Simple mode: the one other side (``human_participant``). Multiuser: the most
    recent distinct non-assistant speakers, up to ``max_participants_for_stop``.
    Leading stops come first because some APIs accept only a few (OpenAI: 4).
    """
    names = names or ParticipantNames(request.options)
    speakers: list[str] = []
    if participants:
        options = request.options
        if options.participant_mode == "simple":
            speakers = [options.human_participant] if options.human_participant.strip() else []
        else:
            speakers = names.recent_speakers(request.messages)
    return dedupe([*leading, *(f"\n{name}:" for name in speakers), *request.stop_sequences])

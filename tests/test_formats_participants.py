"""Participant names in prefill transcripts: suppression rules and stop sequences."""

from __future__ import annotations

from typing import Any

import pytest

from voice_membrane.formats import AnthropicXmlFormatter, CompletionsFormatter
from voice_membrane.formats.participants import (
    ParticipantNames,
    name_prefix,
    stop_sequences,
)
from voice_membrane.vocab.messages import Message, Request, make_request


def request(speakers: list[str], *, stops: list[str] | None = None, **options: Any) -> Request:
    options.setdefault("assistant_participant", "Claude")
    options.setdefault("participant_mode", "multiuser")
    return make_request(
        {
            "messages": [
                {"participant": who, "content": f"line {n}"} for n, who in enumerate(speakers)
            ],
            "config": {"model": "m"},
            "stop_sequences": stops or [],
            "options": options,
        }
    )


def transcript(req: Request, **kwargs: Any) -> str:
    built = CompletionsFormatter(eot_token="", **kwargs).build(req)
    assert built.prefill is not None
    return built.prefill


def test_name_prefix_format() -> None:
    assert name_prefix("Alice") == "Alice: "
    assert name_prefix("Alice", "[{name}] ") == "[Alice] "


def test_empty_names_suppressed_by_default() -> None:
    req = request(["Alice", "", "  "])
    assert transcript(req) == "Alice: line 0\n\nline 1\n\nline 2\n\nClaude:"


def test_empty_names_kept_when_rule_off() -> None:
    req = request(["", "Bob"], participant_rules={"suppress_empty_names": False})
    assert transcript(req) == ": line 0\n\nBob: line 1\n\nClaude:"


def test_consecutive_same_speaker_off_by_default() -> None:
    req = request(["Alice", "Alice", "Bob"])
    assert transcript(req) == "Alice: line 0\n\nAlice: line 1\n\nBob: line 2\n\nClaude:"


def test_consecutive_same_speaker_suppressed_when_on() -> None:
    req = request(
        ["Alice", "Alice", "Bob", "Alice"],
        participant_rules={"suppress_consecutive_same_participant": True},
    )
    assert transcript(req) == ("Alice: line 0\n\nline 1\n\nBob: line 2\n\nAlice: line 3\n\nClaude:")


def test_always_suppressed_participants() -> None:
    req = request(["Narrator", "Alice"], participant_rules={"always_suppress": ["Narrator"]})
    assert transcript(req) == "line 0\n\nAlice: line 1\n\nClaude:"


def test_custom_predicate_gets_message_previous_and_flags() -> None:
    seen: list[tuple[str, str | None, bool, bool]] = []

    def quiet_bob(
        message: Message, previous: Message | None, is_consecutive: bool, is_empty: bool
    ) -> bool:
        seen.append(
            (
                message.participant,
                previous.participant if previous else None,
                is_consecutive,
                is_empty,
            )
        )
        return message.participant == "Bob"

    req = request(["Alice", "Bob", "Bob", "Alice"])
    assert transcript(req, suppression=quiet_bob) == (
        "Alice: line 0\n\nline 1\n\nline 2\n\nAlice: line 3\n\nClaude:"
    )
    assert seen == [
        ("Alice", None, False, False),
        ("Bob", "Alice", False, False),
        ("Bob", "Bob", True, False),
        ("Alice", "Bob", False, False),
    ]


def test_predicate_applies_to_anthropic_xml_too() -> None:
    req = request(["Alice", "Bob"])
    built = AnthropicXmlFormatter(suppression=lambda m, p, c, e: m.participant == "Alice").build(
        req
    )
    assert built.prefill == "line 0\n\nBob: line 1\n\nClaude:"


def test_simple_mode_writes_two_sides() -> None:
    req = request(["Alice", "Claude", "Bob"], participant_mode="simple", human_participant="Human")
    assert transcript(req) == "Human: line 0\n\nClaude: line 1\n\nHuman: line 2\n\nClaude:"
    names = ParticipantNames(req.options)
    assert [names.display(m) for m in req.messages] == ["Human", "Claude", "Human"]


def test_multiuser_stops_most_recent_first_up_to_the_limit() -> None:
    req = request(
        ["Alice", "Bob", "Claude", "Carol", "Alice", "Claude"], max_participants_for_stop=2
    )
    assert stop_sequences(req) == ["\nAlice:", "\nCarol:"]


def test_multiuser_stops_skip_assistant_and_empty_names() -> None:
    req = request(["", "Claude", "Bob"], max_participants_for_stop=10)
    assert stop_sequences(req) == ["\nBob:"]


def test_zero_max_participants_means_no_participant_stops() -> None:
    req = request(["Alice", "Bob"], max_participants_for_stop=0, stops=["END"])
    assert stop_sequences(req) == ["END"]


def test_simple_mode_stop_is_the_human_side_plus_callers() -> None:
    req = request(
        ["Alice", "Bob"],
        participant_mode="simple",
        human_participant="User",
        stops=["\nUser:", "###"],
    )
    assert stop_sequences(req, leading=["</function_calls>"]) == [
        "</function_calls>",
        "\nUser:",
        "###",
    ]


def test_tool_result_messages_are_not_speakers() -> None:
    req = make_request(
        {
            "messages": [
                {"participant": "Alice", "content": "weather?"},
                {
                    "participant": "Claude",
                    "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {}}],
                },
                {
                    "participant": "Tools",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                },
            ],
            "config": {"model": "m"},
            "options": {"assistant_participant": "Claude", "participant_mode": "multiuser"},
        }
    )
    assert stop_sequences(req) == ["\nAlice:"]


@pytest.mark.parametrize("mode", ["simple", "multiuser"])
def test_final_cue_is_always_the_assistant(mode: str) -> None:
    req = request(
        ["Claude"],
        participant_mode=mode,
        participant_rules={
            "suppress_consecutive_same_participant": True,
            "always_suppress": ["Claude"],
        },
    )
    assert transcript(req) == "line 0\n\nClaude:"

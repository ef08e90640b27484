"""Participant names: a user cannot speak as the assistant, a role or another user.

Names are compared as a model reads them (``vocab/names.py``): case, spaces and
dots at the ends, look-alike letters (Cyrillic, Greek, small capitals, capital
I for l), full width and other compatibility forms, invisible characters
inside. Refused with one line naming the field, before any call.
"""

# ruff: noqa: RUF001 (look-alike letters, full-width tokens and separators are the inputs)

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.vocab.messages import (
    Message,
    ModelConfig,
    Request,
    RequestError,
    RequestOptions,
    participant_problem,
    validate_request,
)
from voice_membrane.vocab.names import looks_alike, name_keys

LOOK_ALIKES = [
    "claude",
    "CLAUDE",
    "Claude ",
    " Claude",
    "Claude.",
    ".Claude",
    "Claude...",
    "**Claude**",
    "C laude",
    "\u0421laude",  # Cyrillic capital Es
    "Cl\u0430ude",  # Cyrillic small a
    "Cl\u03b1ude",  # Greek small alpha
    "\u0421\u04cf\u0430ud\u0435",  # mostly Cyrillic
    "Ｃｌａｕｄｅ",  # full width
    "𝐂𝐥𝐚𝐮𝐝𝐞",  # mathematical bold (NFKC)
    "Cl\u200baude",  # zero-width space
    "Cla\u200dude",  # zero-width joiner
    "Clau\u00adde",  # soft hyphen
    "C\u2060laude",  # word joiner
    "Claude\ufe0f",  # variation selector
    "\u202eClaude",  # bidi override
    "CIaude",  # capital i for small L
    "C1aude",
    "ᴄʟᴀᴜᴅᴇ",  # small capitals
]
DIFFERENT = ["Claudette", "Claud", "Clyde", "Maude", "Cla-ude", "Bob", "日本"]


def request(participants: list[str], *, human: str = "User", mode: str = "multiuser") -> Request:
    return Request(
        messages=[Message(participant=name, content="hi") for name in participants],
        config=ModelConfig(model="m"),
        options=RequestOptions(
            assistant_participant="Claude",
            human_participant=human,
            participant_mode=mode,  # type: ignore[arg-type]
        ),
    )


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_a_look_alike_of_the_assistant_is_refused_as_a_user(name: str) -> None:
    assert looks_alike(name, "Claude")
    with pytest.raises(RequestError, match=r"^messages\[1\]\.participant: .*assistant's name"):
        validate_request(request(["Bob", name]))
    with pytest.raises(RequestError, match=r"^options\.human_participant: .*assistant's name"):
        validate_request(request(["Claude"], human=name, mode="simple"))


@pytest.mark.parametrize("name", DIFFERENT)
def test_a_name_that_only_resembles_is_accepted(name: str) -> None:
    assert not looks_alike(name, "Claude")
    validate_request(request(["Claude", name, "Claude"]))
    validate_request(request([name], human=name, mode="simple"))


@pytest.mark.parametrize("name", ["System", "system", "SYSTEM:", "Ｓystem", "\u0405ystem"])
def test_a_system_role_name_is_never_a_users(name: str) -> None:
    with pytest.raises(RequestError, match="looks like the role name 'System'"):
        validate_request(request([name]))


@pytest.mark.parametrize("name", ["Assistant", "assistant", "Model", "Developer"])
def test_the_assistant_and_developer_roles_are_not_a_users_either(name: str) -> None:
    with pytest.raises(RequestError, match="role name"):
        validate_request(request(["Bob"], human=name, mode="simple"))


@pytest.mark.parametrize("name", ["User", "Human"])
def test_the_human_roles_are_a_users_names(name: str) -> None:
    validate_request(request([name]))
    validate_request(request([name], human=name, mode="simple"))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Bob", "bob"),
        ("Bob", "Bob."),
        ("Alice", "\u0410lice"),
        ("Alice", "Al\u200bice"),
        ("User", "user "),
        ("Ian", "lan"),
        ("Ian", "ian"),
    ],
)
def test_multiuser_participants_cannot_look_like_each_other(first: str, second: str) -> None:
    with pytest.raises(RequestError, match=r"messages\[2\]\.participant: .*another participant"):
        validate_request(request([first, "Claude", second]))
    validate_request(request([first, "Claude", first]))  # the same name is the same person
    validate_request(request([first, "Claude", second], mode="simple"))  # names not written


def test_a_refused_name_is_one_short_line() -> None:
    with pytest.raises(RequestError) as caught:
        validate_request(request(["\u0421laude" + "." * 100_000]))
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200
    assert participant_problem(RequestOptions(assistant_participant="Claude"), "Bob") is None


def with_look(name: str, choices: list[int]) -> str:
    """``name`` with letters swapped for look-alikes, per ``choices``."""
    swaps = {
        "C": ["C", "c", "\u0421", "Ｃ", "ᴄ"],
        "l": ["l", "L", "I", "1", "\u04cf", "ʟ"],
        "a": ["a", "A", "\u0430", "\u03b1", "ａ"],
        "u": ["u", "U", "ᴜ", "ｕ"],
        "d": ["d", "D", "\u0501", "ｄ"],
        "e": ["e", "E", "\u0435", "\u03b5", "ｅ"],
    }
    out = [swaps[ch][choices[n] % len(swaps[ch])] for n, ch in enumerate(name)]
    return "".join(out)


@settings(max_examples=200, deadline=None)
@given(
    choices=st.lists(st.integers(0, 20), min_size=6, max_size=6),
    inside=st.sampled_from(["", "\u200b", "\u2060", "\u00ad", " "]),
    at=st.integers(1, 5),
    ends=st.tuples(st.sampled_from(["", " ", ".", "*", "'"]), st.sampled_from(["", " ", ".", ":"])),
)
def test_any_spelling_of_the_assistants_name_is_refused(
    choices: list[int], inside: str, at: int, ends: tuple[str, str]
) -> None:
    name = with_look("Claude", choices)
    name = ends[0] + name[:at] + inside + name[at:] + ends[1]
    assert participant_problem(RequestOptions(assistant_participant="Claude"), name) is not None
    assert name_keys(name)

"""JsonToolInterceptor: JSON tool calls inside a reply's text become hidden
tool_call blocks; everything else is narrative, unchanged, whatever the split."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.parse.json_tools import JsonToolInterceptor
from voice_membrane.vocab.events import (
    BlockComplete,
    BlockStart,
    Chunk,
    Event,
    merge_adjacent_chunks,
)


def run(text: str, size: int = 1, **options: Any) -> list[Event]:
    interceptor = JsonToolInterceptor(**options)
    events: list[Event] = []
    for i in range(0, len(text), size):
        events += interceptor.feed(text[i : i + size])
    return events + interceptor.flush()


def spoken(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, Chunk) and e.meta.visible)


def calls(events: list[Event]) -> list[tuple[str | None, Any]]:
    return [
        (e.block.tool_name, e.block.input)
        for e in events
        if isinstance(e, BlockComplete) and e.block.type == "tool_call"
    ]


WEATHER = ("get_weather", {"city": "Paris"})


@pytest.mark.parametrize(
    ("text", "said", "called"),
    [
        (
            'Let me check.\n\n{"tool": "get_weather", "params": {"city": "Paris"}}',
            "Let me check.\n\n",
            [WEATHER],
        ),
        (
            'I\'ll use {"name": "get_weather", "arguments": {"city": "Paris"}} now.',
            "I'll use  now.",
            [WEATHER],
        ),
        ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}', "", [WEATHER]),
        (
            'Ok <tool_call>{"name": "get_weather", "parameters": {"city": "Paris"}}'
            "</tool_call> done",
            "Ok  done",
            [WEATHER],
        ),
        (
            'Ok <tool_call>\n{"name": "get_weather", "input": {"city": "Paris"}}\n</tool_call>',
            "Ok ",
            [WEATHER],
        ),
        (
            'Sure.\n```json\n{"tool": "get_weather", "params": {"city": "Paris"}}\n```\nBye.',
            "Sure.\n\nBye.",
            [WEATHER],
        ),
        ('{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}', "", [WEATHER]),
        # Braces inside strings do not end the call.
        (
            '{"tool": "echo", "params": {"text": "a } or { b"}} ok',
            " ok",
            [("echo", {"text": "a } or { b"})],
        ),
        # Two calls in a row.
        ('{"tool": "a"}{"tool": "b", "params": {"x": 1}}', "", [("a", {}), ("b", {"x": 1})]),
        # False alarms: said as written.
        ("The format { key: value } is common.", "The format { key: value } is common.", []),
        ("A set {1, 2, 3} and {}.", "A set {1, 2, 3} and {}.", []),
        ('A person {"name": "Bob", "age": 3}.', 'A person {"name": "Bob", "age": 3}.', []),
        ('Bad args {"tool": "x", "params": [1]}.', 'Bad args {"tool": "x", "params": [1]}.', []),
        (
            "Use <b>bold</b>, `code` and ``` fences ```.",
            "Use <b>bold</b>, `code` and ``` fences ```.",
            [],
        ),
        ("<tool_call>not json</tool_call>", "<tool_call>not json</tool_call>", []),
    ],
)
def test_cases(text: str, said: str, called: list[tuple[str, Any]]) -> None:
    for size in (1, 2, 7, len(text)):
        events = run(text, size)
        assert spoken(events) == said, size
        assert calls(events) == called, size


def test_a_call_is_hidden_has_an_id_and_its_input() -> None:
    events = run('Hi. {"tool": "get_weather", "params": {"city": "Paris"}}', 4)
    call = [e for e in events if isinstance(e, Chunk) and e.meta.type == "tool_call"]
    assert call and not any(c.meta.visible for c in call)
    assert {c.meta.tool_call_part for c in call} == {"name", "input"}
    complete = [e for e in events if isinstance(e, BlockComplete)]
    assert [b.block.type for b in complete] == ["text", "tool_call"]
    assert complete[1].block.tool_id == "toolu_json_1"
    assert [e.index for e in events if isinstance(e, BlockStart)] == [0, 1]


def test_an_unfinished_call_is_neither_run_nor_spoken() -> None:
    events = run('Cut off: {"tool": "get_weather", "params": {"city": "Par', 3)
    assert spoken(events) == "Cut off: "
    assert calls(events) == [(None, None)]  # a call with no name: the tool loop skips it


def test_the_hold_is_bounded() -> None:
    # "{" then prose that could still be a key, for longer than the hold: said.
    text = '{"' + "n" * 300
    interceptor = JsonToolInterceptor(max_hold=50)
    out = interceptor.feed(text)
    assert spoken(out).startswith('{"n')  # released long before the end of the stream
    assert not interceptor.holding


def test_placeholder_and_passthrough_modes() -> None:
    text = 'Checking. {"tool": "get_weather", "params": {"city": "Paris"}}'
    events = run(text, 3, mode="placeholder", placeholder="One moment.")
    assert spoken(events) == "Checking. One moment."
    assert calls(events) == [WEATHER]
    assert spoken(run(text, 3, mode="passthrough")) == text
    with pytest.raises(ValueError, match="mode"):
        JsonToolInterceptor(mode="loud")  # type: ignore[arg-type]


def test_reserved_ids_are_skipped() -> None:
    interceptor = JsonToolInterceptor()
    interceptor.reserve_ids(["toolu_json_1"])
    events = interceptor.feed('{"tool": "a"}') + interceptor.flush()
    assert [e.block.tool_id for e in events if isinstance(e, BlockComplete)] == ["toolu_json_2"]


# ------------------------------------------------------------------ fuzz

# No letters: noise can never spell a call's key, so all of it is narrative.
NOISE = st.text(alphabet="ab {}[]<>/`\"':,.\n\\0", max_size=40)
CALL = st.builds(
    lambda name, args, form: (
        name,
        args,
        {
            "bare": json.dumps({"tool": name, "params": args}),
            "named": json.dumps({"name": name, "arguments": args}),
            "tag": "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>",
            "fence": "\n```json\n" + json.dumps({"tool": name, "params": args}) + "\n```\n",
        }[form],
    ),
    st.sampled_from(["get_weather", "set_timer"]),
    st.dictionaries(
        st.sampled_from(["city", "q"]), st.text(alphabet='xy {}"\\', max_size=6), max_size=2
    ),
    st.sampled_from(["bare", "named", "tag", "fence"]),
)


@settings(max_examples=300, deadline=None)
@given(NOISE, st.integers(1, 9))
def test_noise_is_all_narrative_whatever_the_split(noise: str, size: int) -> None:
    events = run(noise, size)
    assert spoken(events) == noise
    assert calls(events) == []
    assert merge_adjacent_chunks(events) == merge_adjacent_chunks(run(noise, len(noise) or 1))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a. ", "ok\n", " b ", ""]), CALL), max_size=4),
    NOISE,
    st.integers(1, 9),
)
def test_calls_among_narrative_lose_and_double_nothing(
    parts: list[tuple[str, tuple[str, dict[str, str], str]]], tail: str, size: int
) -> None:
    text = "".join(said + written for said, (_, _, written) in parts) + tail
    events = run(text, size)
    assert calls(events) == [(name, args) for _, (name, args, _) in parts]
    expected = "".join(said for said, _ in parts) + tail
    # Fenced calls keep the newlines around their fence as narrative.
    assert spoken(events).replace("\n", "") == expected.replace("\n", "")
    assert merge_adjacent_chunks(events) == merge_adjacent_chunks(run(text, len(text) or 1))

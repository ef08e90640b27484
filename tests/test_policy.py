"""Stream policies (parse/policy.py): the runner's hold / release / reject /
terminate over the event vocabulary, the tool allow-list, and the same over
every split of a stream."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.parse.policy import (
    PolicyContext,
    PolicyRunner,
    PolicyRunners,
    StreamState,
    ToolAllowList,
)
from voice_membrane.parse.xml_stream import XmlStreamParser
from voice_membrane.vocab.events import (
    BlockComplete,
    BlockStart,
    Chunk,
    Event,
    merge_adjacent_chunks,
)

REPLY = (
    "<thinking>Weather first.</thinking>Let me check.\n"
    '<function_calls>\n<invoke name="get_weather"><parameter name="city">Paris'
    '</parameter></invoke>\n<invoke name="delete_files"><parameter name="path">/'
    "</parameter></invoke>\n</function_calls>\nDone."
)


def parse(text: str, size: int = 5) -> list[Event]:
    parser = XmlStreamParser()
    events: list[Event] = []
    for i in range(0, len(text), size):
        events += parser.feed(text[i : i + size])
    return events + parser.flush()


def run(policies: list[Any], events: list[Event]) -> tuple[list[Event], PolicyRunners]:
    runners = PolicyRunners(policies)
    out: list[Event] = []
    for event in events:  # one at a time, as a stream delivers them
        out += runners.feed([event])
    return out + runners.settle(), runners


def tool_names(events: list[Event]) -> list[str | None]:
    return [
        e.block.tool_name
        for e in events
        if isinstance(e, BlockComplete) and e.block.type == "tool_call"
    ]


class Recorder:
    """Passes everything, and writes down what it saw."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def on_chunk(self, event: Event, state: StreamState, context: PolicyContext) -> None:
        if isinstance(event, BlockComplete):
            assert state.just_completed is event.block
            self.seen.append(("complete", state.just_completed.type))
        elif state.current is not None and isinstance(event, Chunk):
            self.seen.append(("open", (state.current.type, state.current.tool_name)))


def test_a_policy_that_decides_nothing_passes_everything_unchanged() -> None:
    events = parse(REPLY)
    recorder = Recorder()
    out, runners = run([recorder], events)
    assert out == events
    assert runners.terminated is None and runners.take_rejected() == []
    assert ("complete", "tool_call") in recorder.seen
    assert ("open", ("tool_call", "get_weather")) in recorder.seen
    assert runners.runners[0].state.blocks == [
        e.block for e in events if isinstance(e, BlockComplete)
    ]


def test_the_allow_list_lets_one_call_pass_and_rejects_the_other() -> None:
    events = parse(REPLY)
    out, runners = run([ToolAllowList({"get_weather"})], events)
    assert tool_names(out) == ["get_weather"]
    # Nothing of the rejected call passed, not even its input (it was held).
    assert not [e for e in out if isinstance(e, Chunk) and e.text.strip() == "/"]
    rejected_index = next(
        e.index
        for e in events
        if isinstance(e, BlockComplete) and e.block.tool_name == "delete_files"
    )
    assert not [
        e
        for e in out
        if (isinstance(e, Chunk) and e.meta.block_index == rejected_index)
        or (isinstance(e, BlockStart | BlockComplete) and e.index == rejected_index)
    ]
    ((block, reason),) = runners.take_rejected()
    assert block.tool_name == "delete_files" and block.input == {"path": "/"}
    assert "delete_files" in reason and "not allowed" in reason
    # Everything else passed, in order.
    kept = [e for e in events if not _of_block(e, rejected_index)]
    assert out == kept


def _of_block(event: Event, index: int) -> bool:
    if isinstance(event, Chunk):
        return event.meta.block_index == index
    return event.index == index


class HoldThinking:
    """Holds each thinking block; releases or rejects it when it completes."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep

    def on_chunk(self, event: Event, state: StreamState, context: PolicyContext) -> None:
        if isinstance(event, BlockStart) and event.type == "thinking":
            context.hold()
        elif isinstance(event, BlockComplete) and event.block.type == "thinking":
            context.release() if self.keep else context.reject("no thinking here")


def test_a_held_block_and_what_follows_wait_then_pass_in_order() -> None:
    events = parse(REPLY)
    runners = PolicyRunners([HoldThinking(keep=True)])
    first_complete = next(i for i, e in enumerate(events) if isinstance(e, BlockComplete))
    # Until the thinking block completes nothing passes.
    assert runners.feed(events[:first_complete]) == []
    out = runners.feed(events[first_complete:]) + runners.settle()
    assert out == events


def test_a_rejected_block_never_passes_and_is_not_a_tool_call() -> None:
    events = parse(REPLY)
    out, runners = run([HoldThinking(keep=False)], events)
    assert not [e for e in out if isinstance(e, Chunk) and e.meta.type == "thinking"]
    assert runners.take_rejected() == []  # only tool calls are reported


class Undecided:
    def on_chunk(self, event: Event, state: StreamState, context: PolicyContext) -> None:
        if isinstance(event, BlockStart) and event.type == "tool_call":
            context.hold()


def test_a_block_still_held_when_the_stream_ends_is_rejected() -> None:
    events = parse(REPLY)
    out, runners = run([Undecided()], events)
    assert tool_names(out) == []
    rejected = runners.take_rejected()
    assert [b.tool_name for b, _ in rejected] == ["get_weather", "delete_files"]
    assert all("never released" in reason for _, reason in rejected)
    # The text after the calls waited behind them, then passed.
    assert "Done." in "".join(e.text for e in out if isinstance(e, Chunk) and e.meta.visible)


class RejectAtCompletion:
    """No hold: the call's chunks pass (to the log), but it is rejected."""

    def on_chunk(self, event: Event, state: StreamState, context: PolicyContext) -> None:
        if isinstance(event, BlockComplete) and event.block.tool_name == "delete_files":
            context.reject("judged too late to hide, not too late to stop")


def test_rejecting_without_a_hold_still_stops_the_call() -> None:
    out, runners = run([RejectAtCompletion()], parse(REPLY))
    assert tool_names(out) == ["get_weather"]
    assert [b.tool_name for b, _ in runners.take_rejected()] == ["delete_files"]


class StopAtCheck:
    def on_chunk(self, event: Event, state: StreamState, context: PolicyContext) -> None:
        if isinstance(event, Chunk) and "check" in (state.current.text if state.current else ""):
            context.terminate("the reply went where it should not")


def test_terminate_ends_everything_at_once() -> None:
    out, runners = run([StopAtCheck()], parse(REPLY, size=1))
    assert runners.terminated == "the reply went where it should not"
    text = "".join(e.text for e in out if isinstance(e, Chunk) and e.meta.visible)
    assert text == "Let me chec"  # up to the chunk that completed the word, exclusive
    assert tool_names(out) == []


class Upper:
    """Changes visible text (send instead of the event)."""

    def on_chunk(self, event: Event, state: StreamState, context: PolicyContext) -> None:
        if isinstance(event, Chunk) and event.meta.visible:
            context.send(Chunk(event.text.upper(), event.meta))


def test_policies_in_a_row_see_what_the_one_before_passed() -> None:
    events = parse(REPLY)
    out, _ = run([Upper(), ToolAllowList({"get_weather"})], events)
    visible = "".join(e.text for e in out if isinstance(e, Chunk) and e.meta.visible)
    assert visible == "LET ME CHECK.\n\nDONE."
    assert tool_names(out) == ["get_weather"]


# ------------------------------------------------------------------ any split

NAMES = st.sampled_from(["get_weather", "delete_files", "set_timer"])
PARTS = st.one_of(
    st.text(alphabet="abc .,!\n", min_size=1, max_size=12),
    st.builds(lambda t: f"<thinking>{t}</thinking>", st.text(alphabet="xyz ", max_size=8)),
    st.builds(
        lambda names: (
            "<function_calls>\n"
            + "".join(
                f'<invoke name="{n}"><parameter name="a">1</parameter></invoke>\n' for n in names
            )
            + "</function_calls>\n"
        ),
        st.lists(NAMES, min_size=1, max_size=3),
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(PARTS, max_size=8), st.integers(min_value=1, max_value=9))
def test_any_split_gives_the_same_judged_stream(parts: list[str], size: int) -> None:
    text = "".join(parts)
    whole, runners_whole = run([ToolAllowList({"get_weather"})], parse(text, size=len(text) or 1))
    split, runners_split = run([ToolAllowList({"get_weather"})], parse(text, size=size))
    assert merge_adjacent_chunks(split) == merge_adjacent_chunks(whole)
    assert set(tool_names(split)) <= {"get_weather"}
    rejected = [b.tool_name for b, _ in runners_split.take_rejected()]
    assert rejected == [b.tool_name for b, _ in runners_whole.take_rejected()]
    assert "get_weather" not in rejected
    # Every call is either passed on or rejected, never lost or doubled.
    assert len(tool_names(split)) + len(rejected) == text.count("<invoke ")


def test_a_runner_alone_is_the_same_as_a_row_of_one() -> None:
    events = parse(REPLY)
    runner = PolicyRunner(ToolAllowList({"get_weather"}))
    alone = runner.feed(events) + runner.settle()
    row, _ = run([ToolAllowList({"get_weather"})], events)
    assert alone == row

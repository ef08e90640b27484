"""Property tests: the parser's logical output does not depend on how the stream
is split, and hidden content never becomes visible."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from hypothesis import given, settings
from hypothesis import strategies as st
from parser_helpers import KNOWN_TAG, completed, parse, shape, split_at, visible_text

from voice_membrane.vocab.events import Block, Chunk

# Text that looks like markup without being a known tag.
LOOKALIKES = [
    "<b>",
    "</b>",
    " a < b ",
    "<3",
    "<thinkingly>",
    "<think",
    "</thin",
    "<function_",
    "<invoke>",
    "<result>",
    "<foo>",
    "<<",
    ">",
    "&amp;",
    "&",
    "\n",
]
WORDS = st.text(alphabet="abcxyz ,.!?'é中", min_size=1, max_size=8)
FRAGMENT = st.one_of(WORDS, st.sampled_from(LOOKALIKES))
PLAIN = st.lists(FRAGMENT, min_size=1, max_size=6).map("".join)


def _no_tag(text: str) -> bool:
    return KNOWN_TAG.search(text) is None


VISIBLE = PLAIN.filter(_no_tag)
# Thinking may mention any tag except its own closer.
THINKING_BODY = st.lists(
    st.one_of(FRAGMENT, st.sampled_from(["<function_calls>", "<thinking>", '<invoke name="x">'])),
    max_size=5,
).map("".join)
PARAM_VALUE = st.one_of(
    PLAIN.filter(lambda t: "</" not in t),
    st.integers(-1000, 1000).map(str),
    st.dictionaries(st.sampled_from("abc"), st.integers(0, 9), max_size=2).map(json.dumps),
)
NAME = st.sampled_from(["search", "get_weather", "f"])


@dataclass(frozen=True)
class Expected:
    """One logical block the stream should produce."""

    type: str
    content: str | None = None
    tool_name: str | None = None
    input: dict[str, Any] | None = None


def _tag(name: str, prefix: str, attr: str = "", closing: bool = False) -> str:
    return f"<{'/' if closing else ''}{prefix}{name}{attr}>"


# Text with no whitespace of its own, and whitespace that stands alone between blocks:
# together they make the words a dropped separator would merge (`ok.` + `Sure`).
BARE = st.text(alphabet="abcxyz.,!?é中", min_size=1, max_size=6)
LAYOUT = st.sampled_from([" ", "\n", "\n\n", " \n\t"])


class _TopLevel:
    """The text blocks a stream's top-level text makes, by the documented rule: a
    text block opens at its first non-space character, taking the whitespace
    before it along; whitespace met before a hidden block is layout and dropped,
    unless the visible text so far ends inside a word (then it is the separator
    and goes with the next text block)."""

    def __init__(self, expected: list[Expected]) -> None:
        self.expected = expected
        self.open: int | None = None  # index in ``expected`` of the open text block
        self.lead = ""
        self.separates = False

    def text(self, text: str) -> None:
        if self.open is not None:
            block = self.expected[self.open]
            self.expected[self.open] = Expected("text", (block.content or "") + text)
        elif text.isspace():
            self.lead += text
            return
        else:
            self.open = len(self.expected)
            self.expected.append(Expected("text", self.lead + text))
            self.lead = ""
        self.separates = not text[-1].isspace()

    def boundary(self) -> None:
        self.open = None
        if not self.separates:
            self.lead = ""


@st.composite
def streams(draw: st.DrawFn) -> tuple[str, list[Expected]]:
    """A wire stream of mixed blocks and the blocks it must parse into."""
    prefix = draw(st.sampled_from(["", "antml:"]))
    wire: list[str] = []
    expected: list[Expected] = []
    top = _TopLevel(expected)
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["text", "bare", "layout", "thinking", "call", "result"]))
        if kind in ("text", "bare", "layout"):
            body = draw({"text": VISIBLE, "bare": BARE, "layout": LAYOUT}[kind])
            wire.append(body)
            top.text(body)
            continue
        top.boundary()
        if kind == "thinking":
            body = draw(THINKING_BODY)
            wire.append(_tag("thinking", prefix) + body + _tag("thinking", prefix, closing=True))
            expected.append(Expected("thinking", body))
        elif kind == "call":
            wire.append(_tag("function_calls", prefix) + "\n")
            for _ in range(draw(st.integers(1, 2))):
                name = draw(NAME)
                params = draw(st.dictionaries(st.sampled_from(["q", "n", "v"]), PARAM_VALUE))
                wire.append(_tag("invoke", prefix, f' name="{name}"') + "\n")
                for key, value in params.items():
                    wire.append(_tag("parameter", prefix, f' name="{key}"') + value)
                    wire.append(_tag("parameter", prefix, closing=True) + "\n")
                wire.append(_tag("invoke", prefix, closing=True) + "\n")
                parsed = {k: _json_or_raw(v) for k, v in params.items()}
                expected.append(Expected("tool_call", None, name, parsed))
            wire.append(_tag("function_calls", prefix, closing=True))
        else:
            body = draw(PLAIN)
            wire.append(_tag("function_results", prefix) + "\n")
            wire.append(_tag("result", prefix, ' tool_use_id="t1"') + escape(body))
            wire.append(_tag("result", prefix, closing=True) + "\n")
            wire.append(_tag("function_results", prefix, closing=True))
            expected.append(Expected("tool_result", body))
    return "".join(wire), expected


def _top_level_text(wire: str) -> str:
    """The stream's top-level text, every hidden block cut out: what a reader sees."""
    return _HIDDEN_BLOCK.sub("", wire)


_HIDDEN_BLOCK = re.compile(
    r"<(?:antml:)?(thinking|function_calls|function_results)>.*?</(?:antml:)?\1>", re.S
)


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def _json_or_raw(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def _as_expected(block: Block) -> Expected:
    if block.type == "tool_call":
        return Expected("tool_call", None, block.tool_name, block.input)
    return Expected(block.type, block.content)


@settings(max_examples=300, deadline=None)
@given(streams(), st.data())
def test_any_split_gives_the_same_blocks_and_visible_text(
    generated: tuple[str, list[Expected]], data: st.DataObject
) -> None:
    wire, expected = generated
    cuts = data.draw(st.lists(st.integers(0, len(wire)), max_size=40))
    pieces = split_at(wire, cuts)
    whole = parse([wire])
    split = parse(pieces)

    # (a) the same logical event sequence, whatever the split
    assert shape(split) == shape(whole)
    assert completed(split) == completed(whole)
    # (b) no word separator is lost: up to whitespace runs, the visible text is the
    # stream's top-level text (tags are never inside words, so cutting them out
    # joins nothing the stream kept apart)
    assert _collapsed(visible_text(split)) == _collapsed(_top_level_text(wire))
    # the blocks are the ones written
    assert [_as_expected(b.block) for b in completed(whole)] == expected
    # (c) no tag text and no hidden text in a visible chunk
    for event in split:
        if isinstance(event, Chunk) and event.meta.visible:
            assert not KNOWN_TAG.search(event.text)
    # (d) the visible text is exactly the text blocks
    want = "".join(b.content or "" for b in expected if b.type == "text")
    assert visible_text(split) == want


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='<>/abcdefghiklmnoprstuvw_=" :\n&;', max_size=80), st.data())
def test_arbitrary_text_never_breaks_the_parser_and_is_split_invariant(
    text: str, data: st.DataObject
) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=20))
    whole = parse([text])
    assert shape(parse(split_at(text, cuts))) == shape(whole)
    for event in whole:
        if isinstance(event, Chunk) and event.meta.visible:
            assert not KNOWN_TAG.search(event.text)


@settings(max_examples=100, deadline=None)
@given(streams(), st.integers(0, 400))
def test_prefill_then_stream_equals_the_stream_read_in_context(
    generated: tuple[str, list[Expected]], at: int
) -> None:
    """Whatever point the prefill ends at, prefill + continuation yields the same
    visible text after that point as the whole stream does."""
    wire, _ = generated
    at = min(at, len(wire))
    continued = parse([wire[at:]], prefill=wire[:at])
    whole_visible = visible_text(parse([wire]))
    assert whole_visible.endswith(visible_text(continued))


@settings(max_examples=200, deadline=None)
@given(streams(), st.integers(0, 400))
def test_a_stream_cut_anywhere_yields_no_nameless_call(
    generated: tuple[str, list[Expected]], at: int
) -> None:
    """A reply cut short (max tokens, a dropped connection) ends where it ends: what
    was left inside a tool-call container belongs to no invoke and is never a call."""
    wire, expected = generated
    cut = wire[: min(at, len(wire))]
    calls = [b.block for b in completed(parse([cut])) if b.block.type == "tool_call"]
    assert all(call.tool_name and call.tool_id for call in calls), calls
    closed = len(re.findall(r"</(?:antml:)?invoke>", cut))
    want = [e for e in expected if e.type == "tool_call"][:closed]
    assert [_as_expected(call) for call in calls[:closed]] == want

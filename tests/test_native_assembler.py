"""NativeBlockAssembler: native block events → the event vocabulary, with the
same guarantees as the XML parser (split invariance, hidden stays hidden)."""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from native_events import assemble

from voice_membrane.parse import NativeBlockAssembler, XmlStreamParser
from voice_membrane.testing.png import solid_png
from voice_membrane.vocab.events import (
    Block,
    BlockComplete,
    BlockStart,
    Chunk,
    Event,
    merge_adjacent_chunks,
)
from voice_membrane.vocab.messages import GeneratedImageContent
from voice_membrane.vocab.provider_output import (
    NativeDelta,
    NativeImage,
    NativeStart,
    NativeStop,
    ProviderOutput,
    StrayDelta,
)

# A logical block: ("text", s) | ("thinking", s) | ("tool", name, input)
TEXT = st.text(alphabet="ab <>&\n.é", min_size=0, max_size=12)
BLOCK = st.one_of(
    st.tuples(st.just("text"), TEXT),
    st.tuples(st.just("thinking"), TEXT),
    st.tuples(
        st.just("tool"),
        st.sampled_from(["f", "get_weather"]),
        st.dictionaries(st.sampled_from("xyz"), st.integers(0, 99) | TEXT, max_size=3),
    ),
)


def outputs(blocks: list[tuple[Any, ...]], cuts: list[int]) -> list[ProviderOutput]:
    """The blocks as native provider output, each body cut at ``cuts`` (mod length)."""
    out: list[ProviderOutput] = []
    for n, block in enumerate(blocks):
        kind = block[0]
        if kind == "tool":
            out.append(NativeStart("tool_call", f"call_{n}", block[1]))
            body = json.dumps(block[2])
        else:
            out.append(NativeStart(kind))
            body = block[1]
        points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
        out += [NativeDelta(body[a:b]) for a, b in itertools.pairwise(points)]
        out.append(NativeStop(signature="sig" if kind == "thinking" else None))
    return out


@given(st.lists(BLOCK, max_size=6), st.lists(st.integers(0, 40), max_size=5))
def test_any_split_gives_the_same_events(blocks: list[tuple[Any, ...]], cuts: list[int]) -> None:
    whole = merge_adjacent_chunks(assemble(outputs(blocks, [])))
    assert merge_adjacent_chunks(assemble(outputs(blocks, cuts))) == whole


@given(st.lists(BLOCK, max_size=6), st.lists(st.integers(0, 40), max_size=5))
@example(blocks=[("text", "<"), ("text", " "), ("text", "<")], cuts=[])  # words kept apart
def test_only_text_blocks_are_visible_and_structure_holds(
    blocks: list[tuple[Any, ...]], cuts: list[int]
) -> None:
    events = assemble(outputs(blocks, cuts))
    open_index: int | None = None
    expected_index = 0
    for event in events:
        if isinstance(event, BlockStart):
            assert open_index is None and event.index == expected_index
            open_index, expected_index = event.index, expected_index + 1
        elif isinstance(event, Chunk):
            assert event.text and event.meta.block_index == open_index
            assert event.meta.visible == (event.meta.type == "text")
        else:
            assert event.index == open_index
            open_index = None
    assert open_index is None
    completed = [e.block for e in events if isinstance(e, BlockComplete)]
    kept = expected_blocks(blocks)
    assert len(completed) == len(kept)
    for block, original in zip(completed, kept, strict=True):
        if original[0] == "tool":
            assert block.input == original[2] and block.tool_name == original[1]
        else:
            assert block.content == original[1]


def expected_blocks(blocks: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The blocks as assembled: whitespace-only text is layout and makes no block;
    but when the visible text so far ends inside a word, that whitespace separates
    it from the next text and opens the next text block (docs/architecture.md)."""
    kept: list[tuple[Any, ...]] = []
    in_word, space = False, ""
    for block in blocks:
        if block[0] != "text":
            kept.append(block)
        elif not block[1].strip():
            space += block[1] if in_word else ""
        else:
            kept.append(("text", space + block[1] if in_word else block[1]))
            in_word, space = not block[1][-1].isspace(), ""
    return kept


def test_same_events_as_the_xml_parser_for_the_same_reply() -> None:
    xml = XmlStreamParser()
    wire = (
        "<thinking>Weather, so the tool.</thinking>Let me check."
        '<function_calls><invoke name="get_weather"><parameter name="city">Paris</parameter>'
        "</invoke></function_calls>"
    )
    from_xml = merge_adjacent_chunks(xml.feed(wire) + xml.flush())
    native = assemble(
        [
            NativeStart("thinking"),
            NativeDelta("Weather, so the tool."),
            NativeStop(),
            NativeStart("text"),
            NativeDelta("Let me check."),
            NativeStop(),
            NativeStart("tool_call", "toolu_xml_1", "get_weather"),
            NativeDelta('{"city": "Paris"}'),
            NativeStop(),
        ]
    )

    def logical(events: list[Event]) -> list[Any]:
        # Tool input chunks differ by nature (parameter values vs JSON); the parsed
        # input on the completed block is what must agree.
        return [
            (e.meta.type, e.meta.tool_call_part, e.meta.visible, e.meta.depth)
            if isinstance(e, Chunk) and e.meta.tool_call_part == "input"
            else e
            for e in events
        ]

    assert logical(merge_adjacent_chunks(native)) == logical(from_xml)


def test_malformed_tool_input_is_kept_not_lost() -> None:
    events = assemble([NativeStart("tool_call", "c1", "f"), NativeDelta('{"a": 1'), NativeStop()])
    block = events[-1]
    assert isinstance(block, BlockComplete)
    assert block.block == Block("tool_call", '{"a": 1', "c1", "f", {})


def test_whole_input_from_the_provider_wins_and_signatures_are_kept() -> None:
    events = assemble(
        [
            NativeStart("thinking", redacted_data="opaque"),
            NativeStop(),
            NativeStart("tool_call", "c1", "f"),
            NativeDelta('{"a": 1}'),
            NativeStop(input={"a": 1}, signature="thought-sig"),
        ]
    )
    blocks = [e.block for e in events if isinstance(e, BlockComplete)]
    assert blocks[0] == Block("thinking", "", redacted_data="opaque")
    assert blocks[1].input == {"a": 1} and blocks[1].signature == "thought-sig"


def test_tool_results_continue_the_indices() -> None:
    assembler = NativeBlockAssembler()
    events = assembler.start("text") + assembler.delta("Hi") + assembler.stop()
    events += assembler.tool_result("c1", "22 °C", tool_name="get_weather")
    assert [e.index for e in events if isinstance(e, BlockStart)] == [0, 1]
    chunk = events[-2]
    assert isinstance(chunk, Chunk) and not chunk.meta.visible
    assert chunk.meta.type == "tool_result" and chunk.meta.tool_id == "c1"


# ------------------------------------------------------------------ visibility by construction


def visible_text(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, Chunk) and e.meta.visible)


def test_a_delta_with_no_open_block_is_hidden_stray_text() -> None:
    # A thinking delta after its block stopped (or before any start) must never be spoken.
    events = assemble(
        [
            NativeStart("thinking"),
            NativeStop(),
            NativeDelta("the secret plan"),
            NativeStart("text"),
            NativeDelta("Hello."),
            NativeStop(),
        ]
    )
    assert visible_text(events) == "Hello."
    stray = [e.block for e in events if isinstance(e, BlockComplete)][1]
    assert stray == Block("tool_call", "the secret plan", input={})
    hidden = [e for e in events if isinstance(e, Chunk) and e.text == "the secret plan"]
    assert len(hidden) == 1 and not hidden[0].meta.visible and hidden[0].meta.tool_name is None


def test_deltas_of_a_block_of_unknown_type_are_hidden() -> None:
    unknown: Any = "server_tool_use"  # a type a newer reader might pass through
    events = assemble([NativeStart(unknown), NativeDelta('{"query": "x"}'), NativeStop()])
    assert visible_text(events) == ""
    assert [e.type for e in events if isinstance(e, BlockStart)] == ["tool_call"]


def test_stray_text_never_interrupts_the_open_block() -> None:
    events = assemble(
        [
            NativeStart("text"),
            NativeDelta("Hello "),
            StrayDelta("LEAK", "thinking_delta in a 'text' block"),
            NativeDelta("there."),
            NativeStop(),
            StrayDelta("   ", "whitespace"),  # layout: dropped
        ]
    )
    assert visible_text(events) == "Hello there."
    completed = [e.block for e in events if isinstance(e, BlockComplete)]
    assert completed == [Block("text", "Hello there."), Block("tool_call", "LEAK", input={})]


def test_a_whitespace_block_between_hidden_blocks_keeps_visible_words_apart() -> None:
    said = [
        NativeStart("text"),
        NativeDelta("ok."),
        NativeStart("tool_call", "c1", "f"),
        NativeStop(),
        NativeStart("text"),
        NativeDelta("\n\n"),  # a text block of layout only: never a block of its own
        NativeStart("thinking"),
        NativeDelta("hmm"),
        NativeStart("text"),
        NativeDelta("Sure"),
        NativeStop(),
    ]
    events = assemble(said)
    assert visible_text(events) == "ok.\n\nSure"
    texts = [e.block.content for e in events if isinstance(e, BlockComplete)]
    assert texts == ["ok.", None, "hmm", "\n\nSure"]
    # the visible text already ends in whitespace: the block is layout
    said[1] = NativeDelta("ok. ")
    assert visible_text(assemble(said)) == "ok. Sure"


def test_a_tool_call_with_no_id_gets_a_generated_one() -> None:
    events = assemble(
        [NativeStart("tool_call", None, "f"), NativeStop(), NativeStart("tool_call", "", "g")]
    )
    ids = [e.block.tool_id for e in events if isinstance(e, BlockComplete)]
    assert ids == ["toolu_gen_1", "toolu_gen_2"]
    id_chunks = [e.text for e in events if isinstance(e, Chunk) and e.meta.tool_call_part == "id"]
    assert id_chunks == ids


# Any sequence of native items, well formed or not: visible text is exactly what
# was sent inside started text blocks.
_PNG = base64.b64encode(solid_png(1, 1, (9, 9, 9))).decode()
IMAGE = st.builds(
    NativeImage,
    st.builds(GeneratedImageContent, data=st.just(_PNG), is_preview=st.booleans()),
)
ITEM = st.one_of(
    st.builds(
        NativeStart, st.sampled_from(["text", "thinking", "tool_call", "citations", "image"])
    ),
    IMAGE,
    st.builds(NativeStart, st.just("tool_call"), st.sampled_from([None, "", "c1"]), st.just("f")),
    st.builds(NativeDelta, st.sampled_from(["ab", " ", "a b", "\n"])),
    st.builds(StrayDelta, st.sampled_from(["XY", " "]), st.just("stray")),
    st.builds(NativeStop),
)


DELTA = st.builds(NativeDelta, st.sampled_from(["ab", "c.", " ", "a b", "\n", "\n\n"]))
# Whole blocks (a start, then its deltas): text blocks of layout only between hidden
# blocks and words, the case where a dropped block would join two words.
BLOCK = st.tuples(
    st.builds(NativeStart, st.sampled_from(["text", "text", "thinking", "tool_call", "image"])),
    st.lists(DELTA | IMAGE, max_size=3),
    st.lists(st.builds(NativeStop), max_size=1),
).map(lambda b: [b[0], *b[1], *b[2]])
ITEMS = st.one_of(
    st.lists(ITEM, max_size=14),
    st.lists(BLOCK, max_size=6).map(lambda blocks: [item for b in blocks for item in b]),
)


@settings(max_examples=300, deadline=None)
@given(ITEMS)
def test_only_text_inside_a_started_text_block_is_ever_visible(items: list[Any]) -> None:
    events = assemble(items)
    open_type: str | None = None
    said: list[list[str]] = []  # the deltas of each started text block
    for item in items:
        if isinstance(item, NativeStart):
            open_type = item.type
            if open_type == "text":
                said.append([])
        elif isinstance(item, NativeStop):
            open_type = None
        elif isinstance(item, NativeImage):  # opens an image block unless one is open
            open_type = "image"
        elif isinstance(item, NativeDelta) and open_type == "text":
            said[-1].append(item.text)
    # A text block holding only whitespace is layout, never emitted; but when it is
    # the only separator between two visible words, it opens the next text block.
    want, held, separates = "", "", False
    for text in ("".join(b) for b in said):
        if text.strip():
            want, held, separates = want + held + text, "", not text[-1].isspace()
        elif separates:
            held += text
    assert visible_text(events) == want
    # No word separator is lost: up to whitespace runs, the visible text is all the
    # text blocks' text.
    all_text = "".join("".join(b) for b in said)
    assert " ".join(visible_text(events).split()) == " ".join(all_text.split())
    open_index: int | None = None
    for event in events:  # blocks never overlap, even with stray text between them
        if isinstance(event, BlockStart):
            assert open_index is None
            open_index = event.index
        elif isinstance(event, Chunk):
            assert event.meta.block_index == open_index
            assert event.meta.visible == (event.meta.type == "text")
            assert event.meta.type != "image"  # an image is never a chunk
        else:
            image = event.block.image
            # Only an image block holds an image, and only its final one.
            assert image is None or (event.block.type == "image" and not image.is_preview)
            assert event.index == open_index
            open_index = None

"""XmlStreamParser: the behaviour of seed 000 ("prefill mode"), case by case."""

from __future__ import annotations

import re

import pytest
from parser_helpers import (
    KNOWN_TAG,
    completed,
    parse,
    shape,
    split_at,
    visible_text,
)

from voice_membrane.parse import XmlStreamParser
from voice_membrane.vocab.events import (
    Block,
    BlockComplete,
    BlockStart,
    Chunk,
    ChunkMeta,
    merge_adjacent_chunks,
)

TOOL_TURN = (
    "Let me check."
    "<function_calls>\n"
    '<invoke name="search">\n'
    '<parameter name="query">weather</parameter>\n'
    "</invoke>\n"
    "</function_calls>"
    "<function_results>\n"
    '<result tool_use_id="toolu_xml_1">Results: ...</result>\n'
    "</function_results>"
    "Found it!"
)


def test_seed_example_text_thinking_text_exact_sequence() -> None:
    events = merge_adjacent_chunks(
        parse(["Hello <thinking>let me think</thinking>The answer is 42."])
    )
    assert events == [
        BlockStart(0, "text"),
        Chunk("Hello ", ChunkMeta("text", True, 0)),
        BlockComplete(0, Block("text", "Hello ")),
        BlockStart(1, "thinking"),
        Chunk("let me think", ChunkMeta("thinking", False, 1)),
        BlockComplete(1, Block("thinking", "let me think")),
        BlockStart(2, "text"),
        Chunk("The answer is 42.", ChunkMeta("text", True, 2)),
        BlockComplete(2, Block("text", "The answer is 42.")),
    ]


def test_seed_example_with_tool_call_and_result() -> None:
    events = merge_adjacent_chunks(parse([TOOL_TURN]))
    call_meta = {
        "type": "tool_call",
        "visible": False,
        "block_index": 1,
        "depth": 1,
        "tool_id": "toolu_xml_1",
        "tool_name": "search",
    }
    assert events == [
        BlockStart(0, "text"),
        Chunk("Let me check.", ChunkMeta("text", True, 0)),
        BlockComplete(0, Block("text", "Let me check.")),
        BlockStart(1, "tool_call"),
        Chunk("search", ChunkMeta(**call_meta, tool_call_part="name")),  # type: ignore[arg-type]
        Chunk("toolu_xml_1", ChunkMeta(**call_meta, tool_call_part="id")),  # type: ignore[arg-type]
        Chunk("weather", ChunkMeta(**call_meta, tool_call_part="input")),  # type: ignore[arg-type]
        BlockComplete(
            1,
            Block(
                "tool_call", tool_id="toolu_xml_1", tool_name="search", input={"query": "weather"}
            ),
        ),
        BlockStart(2, "tool_result"),
        Chunk(
            "Results: ...",
            ChunkMeta("tool_result", False, 2, depth=1, tool_id="toolu_xml_1", tool_name="search"),
        ),
        BlockComplete(
            2,
            Block("tool_result", "Results: ...", tool_id="toolu_xml_1", tool_name="search"),
        ),
        BlockStart(3, "text"),
        Chunk("Found it!", ChunkMeta("text", True, 3)),
        BlockComplete(3, Block("text", "Found it!")),
    ]


# --- seed "Testing" 1: visible filtering --------------------------------------------------


def test_visibility_follows_block_type() -> None:
    events = parse(["Hi <thinking>secret plan</thinking>there", "<function_calls>"])
    for e in events:
        if isinstance(e, Chunk):
            assert e.meta.visible == (e.meta.type == "text")
    assert visible_text(events) == "Hi there"


# --- seed 2: partial tags that are not membrane tags pass through ----------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Hello <b>bold</b> world",
        "if a < b and b > c",
        "I <3 you",
        "<thinkingly> is not a tag",
        "<invoke> without a name is not a tag",
        '<result> and <result id="x"> are not tags',
        "x <<thinking",
        "tags like <think, </thin and <function_ stay text",
        "<" + "a" * 300,
        '<thinking name="x">, <invoke names="x">, <results> and <function_calls_x>',
        '<Thinking>, <invoke name=x>, <invoke name="a>b"> and <parameter name="a"b">',
    ],
)
def test_non_membrane_angle_brackets_are_visible_unchanged(text: str) -> None:
    for pieces in ([text], list(text)):
        events = parse(pieces)
        assert visible_text(events) == text


# --- seed 3: XML tags are never emitted --------------------------------------------------


@pytest.mark.parametrize("prefix", ["", "antml:"])
def test_no_tag_text_in_any_chunk(prefix: str) -> None:
    stream = TOOL_TURN.replace("<", "<" + prefix).replace("<" + prefix + "/", "</" + prefix)
    stream = "Hi <" + prefix + "thinking>hmm</" + prefix + "thinking>" + stream
    for pieces in ([stream], list(stream), split_at(stream, range(0, len(stream), 3))):
        events = parse(pieces)
        for e in events:
            if isinstance(e, Chunk):
                assert not KNOWN_TAG.search(e.text), e
                assert prefix == "" or prefix not in e.text
        assert [b.block.type for b in completed(events)] == [
            "text",
            "thinking",
            "text",
            "tool_call",
            "tool_result",
            "text",
        ]


# --- seed 4: tool results flow as content with their metadata -------------------------------


def test_tool_result_content_is_unwrapped_and_unescaped() -> None:
    stream = (
        "<function_results>\n"
        '<result tool_use_id="t1">a &lt;b&gt; &amp; &quot;c&quot; &#65;&#x42; &bogus;</result>\n'
        '<error tool_use_id="t2">boom</error>\n'
        "</function_results>"
    )
    for pieces in ([stream], list(stream)):
        blocks = [b.block for b in completed(parse(pieces))]
        assert blocks == [
            Block("tool_result", 'a <b> & "c" AB &bogus;', tool_id="t1"),
            Block("tool_result", "boom", tool_id="t2", is_error=True),
        ]


def test_entity_split_across_feeds_is_still_unescaped() -> None:
    stream = '<function_results><result tool_use_id="t">x &am</result></function_results>'
    assert completed(parse([stream]))[0].block.content == "x &am"
    pieces = ['<function_results><result tool_use_id="t">x &a', "m", "p;y</result>"]
    assert completed(parse(pieces))[0].block.content == "x &y"


# --- seed 5 & 6: block events fire at the right moments, bracketing their chunks ----------


def test_block_start_fires_at_open_tag_and_complete_at_close_tag() -> None:
    parser = XmlStreamParser()
    assert parser.feed("Hello ") == [
        BlockStart(0, "text"),
        Chunk("Hello ", ChunkMeta("text", True, 0)),
    ]
    assert parser.feed("<thinking>") == [
        BlockComplete(0, Block("text", "Hello ")),
        BlockStart(1, "thinking"),
    ]
    assert parser.feed("</thinking>") == [BlockComplete(1, Block("thinking", ""))]
    assert parser.feed("Bye") == [BlockStart(2, "text"), Chunk("Bye", ChunkMeta("text", True, 2))]
    assert parser.flush() == [BlockComplete(2, Block("text", "Bye"))]


def test_whitespace_between_blocks_is_layout_not_a_text_block() -> None:
    stream = "<thinking>a</thinking>\n<function_calls>\n</function_calls>\n\nDone.\n"
    for pieces in ([stream], list(stream)):
        blocks = [b.block for b in completed(parse(pieces))]
        assert blocks == [Block("thinking", "a"), Block("text", "\n\nDone.\n")]


@pytest.mark.parametrize(
    ("stream", "visible"),
    [
        # whitespace standing alone between hidden blocks separates two words
        (
            'ok.<function_calls><invoke name="f"></invoke></function_calls>\n\n'
            "<thinking>x</thinking>Sure",
            "ok.\n\nSure",
        ),
        ("ok.<thinking>x</thinking> <thinking>y</thinking>Sure", "ok. Sure"),
        # the visible text already ends in a space: the whitespace is layout
        ("ok. <thinking>x</thinking>\n<thinking>y</thinking>Sure", "ok. Sure"),
        # no visible word before it: layout
        ("<thinking>x</thinking>\n<thinking>y</thinking>Sure", "Sure"),
        # none written, none added
        ("ok.<thinking>x</thinking>Sure", "ok.Sure"),
    ],
)
def test_whitespace_between_hidden_blocks_keeps_visible_words_apart(
    stream: str, visible: str
) -> None:
    for pieces in ([stream], list(stream)):
        assert visible_text(parse(pieces)) == visible


def test_a_separator_survives_text_pushed_between_feeds() -> None:
    parser = XmlStreamParser()
    events = parser.feed('ok.<function_calls><invoke name="f"></invoke></function_calls>\n')
    parser.push('<function_results><result tool_use_id="toolu_xml_1">r</result></function_results>')
    events += parser.feed("Sure") + parser.flush()
    assert visible_text(events) == "ok.\nSure"


def test_empty_implicit_text_blocks_are_not_emitted() -> None:
    events = parse(["<thinking>a</thinking><thinking>b</thinking>"])
    assert [type(e).__name__ for e in events] == [
        "BlockStart",
        "Chunk",
        "BlockComplete",
        "BlockStart",
        "Chunk",
        "BlockComplete",
    ]
    assert parse([""]) == []


# --- seed 7: content reconstruction -------------------------------------------------------


def test_concatenated_chunks_are_the_logical_content() -> None:
    events = parse(list(TOOL_TURN))
    text = "".join(e.text for e in events if isinstance(e, Chunk))
    assert text == "Let me check.searchtoolu_xml_1weatherResults: ...Found it!"


# --- partial tag buffering ---------------------------------------------------------------


def test_partial_tag_is_held_only_while_it_can_become_a_tag() -> None:
    parser = XmlStreamParser()
    events = parser.feed("Hello <th")
    assert visible_text(events) == "Hello "
    events = parser.feed("inking>")
    assert [type(e) for e in events] == [BlockComplete, BlockStart]
    parser = XmlStreamParser()
    assert visible_text(parser.feed("Hello <th")) == "Hello "
    assert visible_text(parser.feed("e")) == "<the"  # released at the first impossible char


def test_partial_tag_at_end_of_stream_is_content() -> None:
    events = parse(["Hello <thin"])
    assert visible_text(events) == "Hello <thin"
    events = parse(["<thinking>deep <", "/think"])
    assert completed(events)[0].block == Block("thinking", "deep </think")


def test_tag_split_at_every_position() -> None:
    whole = shape(parse([TOOL_TURN]))
    for i in range(len(TOOL_TURN) + 1):
        assert shape(parse([TOOL_TURN[:i], TOOL_TURN[i:]])) == whole, i


def test_inside_thinking_only_the_closer_is_a_tag() -> None:
    stream = "<thinking>maybe <function_calls> or <b>, then </thinking>ok"
    for pieces in ([stream], list(stream)):
        blocks = [b.block for b in completed(parse(pieces))]
        assert blocks == [
            Block("thinking", "maybe <function_calls> or <b>, then "),
            Block("text", "ok"),
        ]


def test_stray_known_tags_at_top_level_are_dropped_not_spoken() -> None:
    events = parse(['a</thinking>b</function_calls>c<parameter name="x">d</invoke>e'])
    assert visible_text(events) == "abcde"


# --- tool calls --------------------------------------------------------------------------


def test_parameters_are_json_parsed_when_valid() -> None:
    stream = (
        "<function_calls>"
        '<invoke name="f">'
        '<parameter name="n">42</parameter>'
        '<parameter name="obj">{"a": [1, 2], "big": 12345678901234567}</parameter>'
        '<parameter name="flag">true</parameter>'
        '<parameter name="text">hello world</parameter>'
        '<parameter name="quoted">"hi"</parameter>'
        '<parameter name="id">12345678901234567890</parameter>'
        '<parameter name="nan">NaN</parameter>'
        '<parameter name="empty"></parameter>'
        '<parameter name="markup">a <b> and <thinking> stay</parameter>'
        "</invoke>"
        "</function_calls>"
    )
    (call,) = completed(parse([stream]))
    assert call.block.input == {
        "n": 42,
        "obj": {"a": [1, 2], "big": "12345678901234567"},
        "flag": True,
        "text": "hello world",
        "quoted": "hi",
        "id": "12345678901234567890",
        "nan": "NaN",
        "empty": "",
        "markup": "a <b> and <thinking> stay",
    }


def test_one_tool_call_block_per_invoke_with_stable_ids() -> None:
    stream = (
        "<function_calls>\n"
        '<invoke name="a"><parameter name="x">1</parameter></invoke>\n'
        '<invoke name="b"><parameter name="y">2</parameter></invoke>\n'
        "</function_calls>"
    )
    calls = [b.block for b in completed(parse([stream]))]
    assert [(c.tool_name, c.tool_id, c.input) for c in calls] == [
        ("a", "toolu_xml_1", {"x": 1}),
        ("b", "toolu_xml_2", {"y": 2}),
    ]
    assert [b.block for b in completed(parse(list(stream)))] == calls


def test_closer_of_an_enclosing_tag_closes_what_it_encloses() -> None:
    stream = '<function_calls><invoke name="f"><parameter name="q">abc</function_calls>after'
    blocks = [b.block for b in completed(parse([stream]))]
    assert blocks == [
        Block("tool_call", tool_id="toolu_xml_1", tool_name="f", input={"q": "abc"}),
        Block("text", "after"),
    ]


def test_bare_invoke_opens_an_implicit_function_calls_that_closes_with_it() -> None:
    stream = 'Sure.<invoke name="f"><parameter name="q">secret</parameter></invoke> Done.'
    events = parse([stream])
    assert visible_text(events) == "Sure. Done."
    assert completed(events)[1].block.input == {"q": "secret"}


def test_stray_text_between_structural_tags_is_kept_hidden() -> None:
    stream = (
        "<function_calls>\n  oops\n"
        '<invoke name="f">junk<parameter name="q">1</parameter>\n</invoke>\n'
        "</function_calls>"
    )
    events = parse([stream])
    assert visible_text(events) == ""
    blocks = [b.block for b in completed(events)]
    assert blocks[0] == Block("tool_call", content="\n  oops\n", input={})
    assert blocks[1].content == "junk" and blocks[1].input == {"q": 1}
    stray = [e for e in events if isinstance(e, Chunk) and e.meta.tool_call_part is None]
    assert [c.text for c in stray] == ["\n  oops\n", "junk"]


# --- end of stream --------------------------------------------------------------------------


def test_unclosed_hidden_blocks_are_completed_by_flush_and_stay_hidden() -> None:
    events = parse(["Hi <thinking>never closed"])
    assert visible_text(events) == "Hi "
    assert completed(events)[-1].block == Block("thinking", "never closed")
    events = parse(['<function_calls><invoke name="f"><parameter name="q">{"a": 1}'])
    assert completed(events)[-1].block.input == {"q": {"a": 1}}


CALLS = (
    "Checking.<function_calls>\n"
    '<invoke name="search">\n<parameter name="q">rain</parameter>\n</invoke>\n'
    '<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n'
    '<parameter name="days">2</parameter>\n</invoke>\n'
    "</function_calls>"
)
FULL_INPUTS = [{"q": "rain"}, {"city": "Paris", "days": 2}]
KNOWN_INVOKE = re.compile(r'<invoke name="[^"]*">')


@pytest.mark.parametrize(
    "cut_after",
    [
        "</invoke>\n</function_ca",  # inside the closer of <function_calls>
        "</invoke>\n</",
        "</invoke>\n<invo",  # inside the next <invoke
        '</invoke>\n<invoke name="get_wea',
        "</invoke>\n",  # between invokes
        '<invoke name="get_weather">\n<parame',  # inside a <parameter tag
        '<parameter name="city">Paris</parameter>\n<parameter name="da',
    ],
)
def test_a_stream_cut_inside_tool_calls_yields_no_phantom_call(cut_after: str) -> None:
    wire = CALLS[: CALLS.rindex(cut_after) + len(cut_after)]
    for pieces in ([wire], list(wire)):
        calls = [b.block for b in completed(parse(pieces)) if b.block.type == "tool_call"]
        assert all(call.tool_name for call in calls), calls  # nothing nameless
        complete = wire.count("</invoke>")
        assert [call.input for call in calls[:complete]] == FULL_INPUTS[:complete]
        assert len(calls) == len(KNOWN_INVOKE.findall(wire))  # one per invoke opened, no more


def test_every_cut_inside_tool_calls_keeps_one_call_per_invoke_and_none_nameless() -> None:
    for end in range(len("Checking."), len(CALLS) + 1):
        wire = CALLS[:end]
        calls = [b.block for b in completed(parse([wire])) if b.block.type == "tool_call"]
        assert all(call.tool_name for call in calls), (wire, calls)
        opened = len(KNOWN_INVOKE.findall(wire))
        assert len(calls) == opened, wire
        complete = wire.count("</invoke>")
        assert [call.input for call in calls[:complete]] == FULL_INPUTS[:complete]


# --- prefill ------------------------------------------------------------------------------


def test_prefill_that_opens_thinking_makes_the_continuation_thinking() -> None:
    events = parse(["still thinking</thinking>Answer."], prefill="Claude: <thinking>I")
    assert [b.block for b in completed(events)] == [
        Block("thinking", "still thinking"),
        Block("text", "Answer."),
    ]
    assert events[0] == BlockStart(0, "thinking")


def test_prefill_is_never_emitted() -> None:
    parser = XmlStreamParser(prefill="Human: hi\n\nAssistant: Hello")
    assert parser.flush() == []
    assert parser.accumulated == "Human: hi\n\nAssistant: Hello"


def test_tool_call_opened_in_prefill_completes_with_its_full_input() -> None:
    prefill = '<function_calls>\n<invoke name="search">\n<parameter name="q">wea'
    events = parse(["ther</parameter>\n</invoke>\n</function_calls>"], prefill=prefill)
    (call,) = completed(events)
    assert call.block.input == {"q": "weather"}
    assert call.block.tool_name == "search"
    chunks = [e for e in events if isinstance(e, Chunk)]
    assert [(c.meta.tool_call_part, c.text) for c in chunks] == [
        ("name", "search"),
        ("id", "toolu_xml_1"),
        ("input", "ther"),
    ]


def test_prefill_ending_in_a_partial_tag() -> None:
    events = parse(["king>deep</thinking>ok"], prefill="Hi <thin")
    assert [b.block for b in completed(events)] == [
        Block("thinking", "deep"),
        Block("text", "ok"),
    ]


def test_stop_sequence_lookalike_inside_results_is_inside_hidden() -> None:
    parser = XmlStreamParser()
    parser.feed('<function_results><result tool_use_id="1">File contents:\nUser: Hello')
    assert parser.inside_hidden
    parser.feed("</result></function_results>")
    assert not parser.inside_hidden
    parser.feed("\nUser:")
    assert not parser.inside_hidden


# --- nesting ------------------------------------------------------------------------------


def test_nested_transcript_in_a_result_tracks_depth() -> None:
    stream = (
        '<function_results><result tool_use_id="agent">before'
        '<function_calls><invoke name="inner"><parameter name="a">1</parameter></invoke>'
        "</function_calls>after</result></function_results>"
    )
    events = parse([stream])
    blocks = [(b.block.type, b.block.content) for b in completed(events)]
    assert blocks == [("tool_result", "before"), ("tool_call", None), ("tool_result", "after")]
    depths = {e.meta.type: e.meta.depth for e in events if isinstance(e, Chunk)}
    assert depths == {"tool_result": 1, "tool_call": 2}
    assert visible_text(events) == ""


def test_accumulated_holds_everything_fed() -> None:
    parser = XmlStreamParser()
    for piece in ["Hello ", "World", "!", "<function_calls>test</function_calls>"]:
        parser.feed(piece)
    assert parser.accumulated == "Hello World!<function_calls>test</function_calls>"


def test_a_tag_is_looked_for_only_as_far_as_the_longest_tag() -> None:
    """A "<" looks for its ">" within MAX_TAG_LENGTH characters (so untrusted text
    dense with "<" costs linear time, as before: MAX_TAG_LENGTH characters and
    the ">"): a tag of exactly that length still acts, one character more is
    text, and a run of unclosed "<" stays text."""
    from voice_membrane.parse.tags import MAX_TAG_LENGTH

    name = "n" * (MAX_TAG_LENGTH + 1 - len('<invoke name="">'))
    longest = f'<invoke name="{name}"></invoke>'
    events = parse(["Hi. ", longest, " Bye."])
    assert [e.block.tool_name for e in events if isinstance(e, BlockComplete)] == [
        None,
        name,
        None,
    ]
    too_long = f'<invoke name="{name}n"></invoke>'
    for pieces in ([too_long], [too_long[:100], too_long[100:]]):
        assert visible_text(parse(pieces)) == f'<invoke name="{name}n">'
    hostile = "a<" * 5_000 + "<thinking>x</thinking>!"
    assert visible_text(parse([hostile])) == "a<" * 5_000 + "!"

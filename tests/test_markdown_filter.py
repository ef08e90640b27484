"""MarkdownFilter: what is removed, what is kept, and split-independence."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.chunking import MarkdownFilter, Segment


def run(raw: str, code_block_text: str | None = None, pieces: list[str] | None = None) -> str:
    segments = feed_all(raw if pieces is None else pieces, code_block_text)
    return "".join(s.text for s in segments)


def feed_all(raw: str | list[str], code_block_text: str | None = None) -> list[Segment]:
    md = MarkdownFilter(code_block_text=code_block_text)
    out: list[Segment] = []
    for piece in [raw] if isinstance(raw, str) else raw:
        out += md.feed(piece)
    return out + md.flush()


def merged(segments: list[Segment], raw: str) -> list[Segment]:
    """Join adjacent verbatim segments: the split-independent form of the output."""
    out: list[Segment] = []
    for seg in segments:
        last = out[-1] if out else None
        if (
            last is not None
            and last.end == seg.start
            and raw[last.start : last.end] == last.text
            and raw[seg.start : seg.end] == seg.text
            and last.code == seg.code
        ):
            out[-1] = Segment(last.text + seg.text, last.start, seg.end, seg.code)
        else:
            out.append(seg)
    return out


CASES = [
    # emphasis
    ("**Bold** claim.", "Bold claim."),
    ("an *italic* word", "an italic word"),
    ("***both*** here", "both here"),
    ("__strong__ and _em_", "strong and em"),
    ("~~struck~~ text", "struck text"),
    ("a **b**, c", "a b, c"),
    ("(*note*)", "(note)"),
    # look-alikes that stay
    ("2 * 3 = 6", "2 * 3 = 6"),
    ("2*3 = 6", "2*3 = 6"),
    ("snake_case_name", "snake_case_name"),
    ("my_var_name = 1", "my_var_name = 1"),
    ("a_b", "a_b"),
    ("~5 km", "~5 km"),
    ("x ~ y", "x ~ y"),
    ("a - b", "a - b"),
    ("#hashtag", "#hashtag"),
    ("We are #1", "We are #1"),
    ("see [1] and [2]", "see [1] and [2]"),
    ("It costs $3.50 (about €3).", "It costs $3.50 (about €3)."),
    ("<b>bold</b> & more", "<b>bold</b> & more"),
    ("| a | b |\n|---|---|", "| a | b |\n|---|---|"),
    ("https://x.com/a_b_c", "https://x.com/a_b_c"),
    ("**** stars", "**** stars"),
    ("5 - 3 -- 2", "5 - 3 -- 2"),
    ("1. First\n2. Second", "1. First.\n2. Second"),
    ("-5 degrees", "-5 degrees"),
    ("####### seven", "####### seven"),
    # line-start markers
    ("# Title\nText", "Title.\nText"),
    ("### Sub\n", "Sub.\n"),
    ("- one\n- two", "one.\ntwo"),
    ("* one\n+ two", "one.\ntwo"),
    ("  - nested", "  nested"),
    ("> quoted\n> > twice", "quoted\ntwice"),
    ("> - in a quote", "in a quote"),
    ("a\n---\nb", "a\n\nb"),
    ("a\n* * *\nb", "a\n\nb"),
    ("a\n___", "a\n"),
    ("text - not a bullet", "text - not a bullet"),
    ("x\n-- y", "x\n-- y"),
    # inline code
    ("use `pip`", "use pip"),
    ("use ``a ` b``", "use a ` b"),
    ("`*args` stays", "*args stays"),
    ("`open", "open"),
    # links and images
    ("see [the docs](https://x.com/a_(b)) now", "see the docs now"),
    ("![a cat](cat.png) sits", "a cat sits"),
    ("[**bold** link](u)", "bold link"),
    ("[![badge](b.svg)](link)", "badge"),
    ("[not a link] (x)", "[not a link] (x)"),
    ("[a\nb](c)", "[a\nb](c)"),
    ("Wow! Great.", "Wow! Great."),
    ("[x](url\nnext", "x\nnext"),
    # escapes
    ("\\*literal\\*", "*literal*"),
    ("\\# not a heading", "# not a heading"),
    ("C:\\path", "C:\\path"),
    ("end\\", "end\\"),
    # A list item's last two non-blank characters decide its "." whatever the split
    # (blanks between them included): ". \u2019" already ends it.
    ("- Dr. \u2019 \n", "Dr. \u2019 \n"),
    ("- x  y\n", "x  y.\n"),
]


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_filter_cases(raw: str, expected: str) -> None:
    assert run(raw) == expected


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_filter_cases_char_by_char(raw: str, expected: str) -> None:
    assert run(raw, pieces=list(raw)) == expected


def test_link_gives_up_after_200_characters() -> None:
    raw = "[" + "x" * 250 + "](u)"
    assert run(raw) == raw[:-4] + "](u)"


FENCED = "Run this:\n```python\nprint('*hi*')\n```\nDone."


def test_fenced_block_is_skipped() -> None:
    assert run(FENCED) == "Run this:\n\nDone."


def test_fenced_block_with_phrase() -> None:
    segments = merged(feed_all(FENCED, "Here is some code."), FENCED)
    assert [s.text for s in segments] == ["Run this:\n", "Here is some code.", "\nDone."]
    # The phrase stands for the opening fence line; the rest of the block is a gap.
    assert (segments[1].start, segments[1].end) == (10, 20)
    assert segments[2].start == FENCED.index("\nDone.")


def test_phrase_is_emitted_before_the_block_ends() -> None:
    md = MarkdownFilter(code_block_text="Code.")
    assert [s.text for s in md.feed("Look:\n```sh\nls -la\n")] == ["Look:\n", "Code."]
    assert md.feed("echo hi\n") == []
    assert [s.text for s in md.feed("```\nOk")] == ["\nOk"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a\n~~~\ncode\n~~~\nb", "a\n\nb"),
        ("a\n````\n```\nstill code\n````\nb", "a\n\nb"),
        ("a\n```\nunterminated *x*", "a\n"),
        ("```js\nx\n```", ""),
        ("a\n  ```\n  x\n  ```\nb", "a\n  \nb"),
        ("```inline``` code", "inline code"),
        ("a\n```\nx\n``` not a close\n```\nb", "a\n\nb"),
    ],
)
def test_fence_variants(raw: str, expected: str) -> None:
    assert run(raw) == expected
    assert run(raw, pieces=list(raw)) == expected


def test_reuse_after_flush() -> None:
    md = MarkdownFilter()
    md.feed("[held")
    assert [s.text for s in md.flush()] == ["[held"]
    # Offsets restart at 0.
    assert md.feed("**x** ") == [Segment("x", 2, 3), Segment(" ", 5, 6)]


# -- properties ------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "word", "more", " ", "  ", "\n", "\n\n", "*", "**", "***", "_", "__", "~", "~~",
        "`", "``", "```", "```py\n", "~~~\n", "#", "## ", "- ", "* ", "+ ", "> ", "---",
        "[", "]", "(", ")", "![", "](", "[t](u)", "\\", "\\*", "!", "a_b", "2 * 3", "1.",
        "x", ".", ",", "é", "好", "\t", "<b>",
    ]
)  # fmt: skip
_TEXT = st.lists(_PIECES, max_size=40).map("".join)


@st.composite
def _split(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), text=_TEXT, phrase=st.sampled_from([None, "Some code."]))
def test_any_split_gives_the_same_output(
    data: st.DataObject, text: str, phrase: str | None
) -> None:
    whole = merged(feed_all(text, phrase), text)
    split = merged(feed_all(data.draw(_split(text)), phrase), text)
    assert split == whole


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, phrase=st.sampled_from([None, "Some code."]))
def test_segment_spans_are_consistent(text: str, phrase: str | None) -> None:
    segments = feed_all(list(text), phrase)  # char by char: the most fragmented case
    previous_end = 0
    for seg in segments:
        assert seg.text
        assert previous_end <= seg.start <= seg.end <= len(text)
        if seg.start == seg.end:
            assert seg.text == "."  # the break after a heading or list item
        elif seg.text != phrase:
            assert text[seg.start : seg.end] == seg.text
        previous_end = seg.end


def test_a_long_line_of_dashes_is_scanned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A line that may still be a thematic break is held to its end; the scan goes on
    # from where the last feed stopped instead of starting over (which made a hostile
    # 100 KB line of dashes, fed 4 characters at a time, cost minutes).
    peeks = 0
    peek = MarkdownFilter._peek

    def counting(self: MarkdownFilter, i: int) -> str:
        nonlocal peeks
        peeks += 1
        return peek(self, i)

    monkeypatch.setattr(MarkdownFilter, "_peek", counting)
    text = "-" * 20_000 + "\nHello there."
    assert run(text, pieces=[text[i : i + 4] for i in range(0, len(text), 4)]) == "\nHello there."
    assert peeks < 3 * len(text)

"""SpeechChunker invariants, checked on generated text with hypothesis."""

# Full-width CJK punctuation and dashes are test data here.
# ruff: noqa: RUF001

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.chunking import MarkdownFilter, Segment, SpeechChunk, SpeechChunker

_TOKENS = {
    "word": [
        "the", "a", "of", "cat", "Paris", "we", "is", "France", "running", "I", "Hello",
        "ok", "well-", "don't", "it's", "Then", "éclair", "Zoë",
    ],
    "number": ["3.14", "1,000", "$3.50", "10", "2024", "v1.2.3", "10:30", "50%", "1."],
    "abbreviation": [
        "Dr.", "Mr.", "e.g.", "i.e.", "etc.", "a.m.", "U.S.", "J.", "No.", "vs.", "d.", "h.",
        "e.", "g.", "z.", "B.", "u.", "a.", "usw.", "Nr.", "bzw.", "Sra.", "Dott.", "ecc.",
        "dhr.", "bijv.", "p.", "ex.",
    ],
    "punctuation": [
        ".", "!", "?", "?!", "...", "…", ",", ";", ":", "—", " - ", "--", '"', "“", "”",
        "(", ")", "[", "]", "'", "«", "»", ".\"", "!)", "„", "‘", "’", "?”", "!'", ".«",
    ],
    # Inline lists, ordinals and dates: numerals with a period before words and months.
    "ordinal": [
        ": 1.", ". 2.", "3.", "12.", "zum", "am", "März", "Oktober", "mai", "exit", "Tag",
        "3rd", "1er", "2º",
    ],
    "break": ["\n", "\n\n", "\n- ", "\n1. ", "\n# ", "\r\n"],
    "markdown": [
        "**", "*", "_", "`", "```\n", "\n```\n", "[", "](u)", "[t](u)", "~~", "\\", "> ",
        "---", "![a](b)",
    ],
    "cjk": ["好的", "。", "！", "？", "，", "我们", "「", "」", "、"],
}  # fmt: skip

_TOKEN = st.one_of(
    st.sampled_from(_TOKENS["word"]),
    st.sampled_from(_TOKENS["word"]),
    st.sampled_from(_TOKENS["number"]),
    st.sampled_from(_TOKENS["abbreviation"]),
    st.sampled_from(_TOKENS["punctuation"]),
    st.sampled_from(_TOKENS["break"]),
    st.sampled_from(_TOKENS["markdown"]),
    st.sampled_from(_TOKENS["cjk"]),
    st.sampled_from(_TOKENS["ordinal"]),
)
_SEPARATOR = st.sampled_from([" ", " ", " ", "", "  "])
TEXT = st.lists(st.tuples(_TOKEN, _SEPARATOR), max_size=80).map(
    lambda parts: "".join(token + sep for token, sep in parts)
)

OPTIONS: list[dict[str, Any]] = [
    {},
    {"max_chars": 30, "clause_chars": 10},
    {"first_chunk_words": 1, "min_clause_words": 0, "clause_chars": 0, "max_chars": 12},
    {"markdown": False},
    {"markdown": False, "max_chars": 20, "clause_chars": 5},
    {"code_block_text": "Code here.", "max_chars": 40},
    {"language": "de"},
    {"language": "fr", "max_chars": 30, "clause_chars": 10},
    {"language": "en", "first_chunk_words": 1, "min_clause_words": 0, "max_chars": 20},
]


def chunk_pieces(pieces: list[str], options: dict[str, Any]) -> tuple[list[SpeechChunk], int]:
    """All chunks, and how many came from ``flush``."""
    chunker = SpeechChunker(**options)
    out: list[SpeechChunk] = []
    for piece in pieces:
        out += chunker.feed(piece)
    tail = chunker.flush()
    return out + tail, len(tail)


def filtered(text: str, options: dict[str, Any]) -> list[Segment]:
    if options.get("markdown", True) is False:
        return [Segment(text, 0, len(text))] if text else []
    md = MarkdownFilter(code_block_text=options.get("code_block_text"))
    return md.feed(text) + md.flush()


@st.composite
def split(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` cut at random places, sometimes token-sized, sometimes char by char."""
    if draw(st.booleans()) and len(text) < 300:
        return list(text)
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=40)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), text=TEXT, options=st.sampled_from(OPTIONS))
def test_any_split_gives_identical_chunks(
    data: st.DataObject, text: str, options: dict[str, Any]
) -> None:
    whole, _ = chunk_pieces([text], options)
    pieces, _ = chunk_pieces(data.draw(split(text)), options)
    assert pieces == whole


@settings(max_examples=200, deadline=None)
@given(text=TEXT, options=st.sampled_from(OPTIONS))
def test_text_is_preserved(text: str, options: dict[str, Any]) -> None:
    chunks, _ = chunk_pieces([text], options)
    output = "".join(s.text for s in filtered(text, options))
    spoken = "".join(c.text for c in chunks)
    assert output.startswith(spoken)
    assert output[len(spoken) :].strip() == ""
    assert all(c.text.strip() for c in chunks)


@settings(max_examples=200, deadline=None)
@given(text=TEXT, options=st.sampled_from(OPTIONS))
def test_offsets_tile_the_raw_input(text: str, options: dict[str, Any]) -> None:
    chunks, from_flush = chunk_pieces([text], options)
    # Raw offset just after each output character.
    ends: list[int] = []
    for seg in filtered(text, options):
        if seg.end - seg.start == len(seg.text):
            ends += range(seg.start + 1, seg.end + 1)
        else:
            ends += [seg.end] * len(seg.text)
    position, produced = 0, 0
    for index, c in enumerate(chunks):
        assert c.start == position
        produced += len(c.text)
        last_from_flush = from_flush and index == len(chunks) - 1
        assert c.end == (len(text) if last_from_flush else ends[produced - 1])
        assert c.start <= c.end
        position = c.end
    if chunks:
        assert chunks[0].start == 0
        assert chunks[0].kind == "first"
        assert all(c.kind != "first" for c in chunks[1:])


@settings(max_examples=200, deadline=None)
@given(text=TEXT, options=st.sampled_from(OPTIONS))
def test_no_piece_exceeds_max_chars(text: str, options: dict[str, Any]) -> None:
    chunks, _ = chunk_pieces([text], options)
    limit = options.get("max_chars", 250)
    # Leading whitespace (the space or newline after the previous cut) is not counted.
    assert all(len(c.text.lstrip()) <= limit for c in chunks)


@settings(max_examples=100, deadline=None)
@given(words=st.lists(st.sampled_from(["alpha", "the", "of", "10", "x" * 40]), max_size=120))
def test_long_runs_are_forced_at_the_limit(words: list[str]) -> None:
    text = "Okay. " + " ".join(words)
    chunks, _ = chunk_pieces([text], {"max_chars": 50})
    assert all(len(c.text.lstrip()) <= 50 for c in chunks)
    assert "".join(c.text for c in chunks) == text.rstrip()


# -- hazards: tokens a cut must never fall inside ---------------------------------

HAZARDS = [
    "3.14", "v1.2.3", "$3.50", "1,000,000", "10 a.m. today", "Dr. Smith", "Mr. Jones",
    "e.g. this", "i.e. that", "the U.S. economy", "J. K. Rowling", "J.K. Rowling",
    "https://example.com/a.b?x=1", "me@example.org", "10:30", "$3 million", "10 percent",
    "No. 5", "Fig. 2", "Prof. Lee", "St. Louis", "approx. 20", "(see above)",
    "Wait... and see", "the U.S. Postal", "Mon. to Fri.", "10 a.m. Monday",
    # Numerals before a lowercase word or a month, one-letter sequences, abbreviations
    # of other languages, quotes a sentence goes on after.
    "the 3. exit", "12. März", "3. Oktober", "5. mai", "d. h. dass", "u. a. die",
    "z. B. der", "e. g. this", "i. e. that", "usw. und", "Nr. 5", "bzw. die", "Sra. Gómez",
    "Dott. Rossi", "ecc. e", "dhr. Jansen", "p. ex. la", "EE. UU. tienen",
    "“Why?” he", "'Why not?' she", '"Stop!" the', "„Ja?“ fragte", "»Nein!« rief",
]  # fmt: skip
# Inline lists: a lead-in, then items (a numeral and its first word, each a hazard).
LISTS = [
    ": 1. Hold", ": 2. wait", ". 3. Press", "; 4. Open", ", 1. Milk", ": 1. Milk 2. Eggs",
    ": 1. Mehl 2. Eier 3. Milch",
]  # fmt: skip
# Inline code: its backticks are not spoken, its content is, in one piece.
CODE = ["`git commit | -m`", "`make test; make lint. Now go`", "`a, b: c`", "`x — y`"]
# Quoted speech ('"Stop! Now!" he said') is checked in test_chunker.py: the first piece
# may legitimately leave at the word boundary after 'Now!"', so it is no hazard here.
FILLER = ["we", "saw", "it", "there", "Paris", "yesterday", "quickly", "and", "the"]
HAZARD_OPTIONS: list[dict[str, Any]] = [
    {"max_chars": 10_000},
    {"max_chars": 10_000, "first_chunk_words": 1, "min_clause_words": 1},
    {"max_chars": 10_000, "clause_chars": 1},
]


@st.composite
def hazard_text(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]]]:
    """Sentences made of hazard phrases and filler, with the hazards' raw spans."""
    text, spans = "", []
    for _ in range(draw(st.integers(1, 6))):
        pool = HAZARDS + FILLER + CODE + LISTS
        items = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=6))
        for n, item in enumerate(items):
            if n:
                text += draw(st.sampled_from([" ", ", ", " - "]))
            if item in HAZARDS:
                spans.append((len(text), len(text) + len(item)))
            elif item in CODE:  # its content, between the backticks
                spans.append((len(text) + 1, len(text) + len(item) - 1))
            elif item in LISTS:  # its lead-in may end a piece, and so may each item
                for match in re.finditer(r"\d\. \w+", item):
                    spans.append((len(text) + match.start(), len(text) + match.end()))
            text += item
        text += draw(st.sampled_from([". ", "! ", "? ", ".\n", "\n"]))
    return text, spans


@settings(max_examples=200, deadline=None)
@given(case=hazard_text(), options=st.sampled_from(HAZARD_OPTIONS))
def test_no_cut_inside_a_hazard(
    case: tuple[str, list[tuple[int, int]]], options: dict[str, Any]
) -> None:
    text, spans = case
    chunks, _ = chunk_pieces([text], options)
    cuts = {c.end for c in chunks}
    for start, end in spans:
        inside = [cut for cut in cuts if start < cut < end]
        assert not inside, (text[start:end], chunks)

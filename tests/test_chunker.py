"""SpeechChunker on tricky inputs: exact pieces, kinds and raw offsets."""

# Full-width CJK punctuation and dashes are test data here.
# ruff: noqa: RUF001

from __future__ import annotations

from typing import Any

import pytest

from voice_membrane.chunking import SpeechChunk, SpeechChunker


def chunk(text: str, **options: Any) -> list[SpeechChunk]:
    chunker = SpeechChunker(**options)
    return chunker.feed(text) + chunker.flush()


def pieces(text: str, **options: Any) -> list[tuple[str, str]]:
    return [(c.text, c.kind) for c in chunk(text, **options)]


def chunk_tokens(tokens: list[str], **options: Any) -> list[SpeechChunk]:
    chunker = SpeechChunker(**options)
    out: list[SpeechChunk] = []
    for token in tokens:
        out += chunker.feed(token)
    return out + chunker.flush()


CASES: list[tuple[str, list[tuple[str, str]]]] = [
    ("Hi! How are you today?", [("Hi!", "first"), (" How are you today?", "final")]),
    ("Sure. Here you go.", [("Sure.", "first"), (" Here you go.", "final")]),
    (
        "Dr. Smith arrived at 10 a.m. today. He left.",
        [
            ("Dr. Smith arrived", "first"),
            (" at 10 a.m. today.", "sentence"),
            (" He left.", "final"),
        ],
    ),
    ("Pi is 3.14, roughly.", [("Pi is 3.14,", "first"), (" roughly.", "final")]),
    (
        "Version v1.2.3 is out. Update now.",
        [("Version v1.2.3 is out.", "first"), (" Update now.", "final")],
    ),
    ("It costs $3.50 today. Cheap!", [("It costs $3.50 today.", "first"), (" Cheap!", "final")]),
    (
        "We counted 1,000,000 stars. Wow.",
        [("We counted 1,000,000 stars.", "first"), (" Wow.", "final")],
    ),
    (
        "See e.g. the docs, i.e. the manual. Then go.",
        [
            ("See e.g. the docs,", "first"),
            (" i.e. the manual.", "sentence"),
            (" Then go.", "final"),
        ],
    ),
    (
        "Okay. J. K. Rowling wrote it. Yes.",
        [("Okay.", "first"), (" J. K. Rowling wrote it.", "sentence"), (" Yes.", "final")],
    ),
    (
        "Visit https://example.com/a.b?x=1 now. Or mail me@example.org today.",
        [
            ("Visit https://example.com/a.b?x=1 now.", "first"),
            (" Or mail me@example.org today.", "final"),
        ],
    ),
    (
        "1. First item\n2. Second item\n",
        [("1. First item\n", "first"), ("2. Second item\n", "sentence")],
    ),
    (
        'Okay. He said "Stop! Now!" and left. Fine.',
        [("Okay.", "first"), (' He said "Stop! Now!" and left.', "sentence"), (" Fine.", "final")],
    ),
    (
        'Okay. "Stop!" He left.',
        [("Okay.", "first"), (' "Stop!"', "sentence"), (" He left.", "final")],
    ),
    (
        "Okay. (See the note.) Then go.",
        [("Okay.", "first"), (" (See the note.)", "sentence"), (" Then go.", "final")],
    ),
    (
        "Wait... What?! Really.",
        [("Wait...", "first"), (" What?!", "sentence"), (" Really.", "final")],
    ),
    ("Well... maybe not.", [("Well... maybe not.", "first")]),
    ("好的。我们开始吧！", [("好的。", "first"), ("我们开始吧！", "final")]),
    (
        "他说：「好的。」然后走了。",
        [("他说：「好的。」", "first"), ("然后走了。", "final")],
    ),
    (
        "Okay. We meet at 10 a.m. tomorrow. Then lunch.",
        [
            ("Okay.", "first"),
            (" We meet at 10 a.m. tomorrow.", "sentence"),
            (" Then lunch.", "final"),
        ],
    ),
    (
        "Okay. We meet at 10 a.m. Then lunch.",
        [("Okay.", "first"), (" We meet at 10 a.m.", "sentence"), (" Then lunch.", "final")],
    ),
    (
        "Okay. Apples, pears, etc. are fruit. Yes.",
        [("Okay.", "first"), (" Apples, pears, etc. are fruit.", "sentence"), (" Yes.", "final")],
    ),
    (
        "Okay. Room No. 5 is free. No. It is not.",
        [
            ("Okay.", "first"),
            (" Room No. 5 is free.", "sentence"),
            (" No.", "sentence"),
            (" It is not.", "final"),
        ],
    ),
    ("Okay. I live in the U.S.", [("Okay.", "first"), (" I live in the U.S.", "final")]),
    (
        "Okay. It shipped on Jan. 5 in the U.S. Then it sold out.",
        [
            ("Okay.", "first"),
            (" It shipped on Jan. 5 in the U.S.", "sentence"),
            (" Then it sold out.", "final"),
        ],
    ),
    # After an ambiguous period, a capitalised word that is not a common sentence
    # opener is taken for a name: the sentence goes on.
    (
        "Okay. The U.S. Postal Service delivers. Yes.",
        [
            ("Okay.", "first"),
            (" The U.S. Postal Service delivers.", "sentence"),
            (" Yes.", "final"),
        ],
    ),
    (
        "Okay. Open Mon. to Fri. so come by. Yes.",
        [("Okay.", "first"), (" Open Mon. to Fri. so come by.", "sentence"), (" Yes.", "final")],
    ),
    (
        "Okay. Hmm... Paris it is. Yes.",
        [("Okay.", "first"), (" Hmm... Paris it is.", "sentence"), (" Yes.", "final")],
    ),
    (
        'Okay. "Call me," Maria said. Yes.',
        [("Okay.", "first"), (' "Call me," Maria said.', "sentence"), (" Yes.", "final")],
    ),
    (
        "Okay. Wait... However, fine.",
        [("Okay.", "first"), (" Wait...", "sentence"), (" However, fine.", "final")],
    ),
    (
        "Okay. We love A.I. It helps.",
        [("Okay.", "first"), (" We love A.I.", "sentence"), (" It helps.", "final")],
    ),
    (
        "Okay. It is 10:30 now. Go.",
        [("Okay.", "first"), (" It is 10:30 now.", "sentence"), (" Go.", "final")],
    ),
    ("Okay. So do I. Then.", [("Okay.", "first"), (" So do I.", "sentence"), (" Then.", "final")]),
    (
        'Okay. The 6" pipe broke. Fix it.',
        [("Okay.", "first"), (' The 6" pipe broke.', "sentence"), (" Fix it.", "final")],
    ),
    # The first piece leaves early at a word boundary, never after a function word.
    (
        "Today we will explore the history of the Roman Empire in detail.",
        [
            ("Today we will explore", "first"),
            (" the history of the Roman Empire in detail.", "final"),
        ],
    ),
    (
        "The capital of the country is Paris.",
        [("The capital of the country", "first"), (" is Paris.", "final")],
    ),
    (
        "The capital of France is Paris and it is large.",
        [("The capital of France", "first"), (" is Paris and it is large.", "final")],
    ),
    (
        "Prices rose 10 percent this year.",
        [("Prices rose 10 percent", "first"), (" this year.", "final")],
    ),
    (
        "They raised $3 million from investors.",
        [("They raised $3 million", "first"), (" from investors.", "final")],
    ),
    ("In my opinion, this is right.", [("In my opinion,", "first"), (" this is right.", "final")]),
    ("Hi, there you are.", [("Hi,", "first"), (" there you are.", "final")]),
    ("Dogs, cats and birds.", [("Dogs, cats and birds.", "first")]),
    (
        "Okay. Short, clauses; stay: whole — here.",
        [("Okay.", "first"), (" Short, clauses; stay: whole — here.", "final")],
    ),
    # Newlines end pieces that have content.
    ("Line one\n\nLine two", [("Line one\n", "first"), ("\nLine two", "final")]),
    ("\n\nHello there.", [("\n\nHello there.", "first")]),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_pieces(text: str, expected: list[tuple[str, str]]) -> None:
    assert pieces(text) == expected


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_pieces_fed_char_by_char(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(c.text, c.kind) for c in chunk_tokens(list(text))] == expected


def test_later_long_sentence_splits_at_a_clause() -> None:
    head = "Okay."
    long_part = " This sentence keeps going for quite a while" * 3  # 129 characters
    text = f"{head}{long_part}, and then it finally ends. Done."
    assert pieces(text) == [
        ("Okay.", "first"),
        (f"{long_part},", "clause"),
        (" and then it finally ends.", "sentence"),
        (" Done.", "final"),
    ]


def test_short_later_sentence_keeps_its_clauses() -> None:
    assert pieces("Okay. One, two, three.", clause_chars=120)[1] == (" One, two, three.", "final")
    assert pieces("Okay. One, two, three.", clause_chars=4) == [
        ("Okay.", "first"),
        (" One,", "clause"),
        (" two,", "clause"),
        (" three.", "final"),
    ]


def test_dashes_are_clauses() -> None:
    assert pieces("Okay. The plan—if it works—is good.", clause_chars=5) == [
        ("Okay.", "first"),
        (" The plan—", "clause"),
        ("if it works—", "clause"),
        ("is good.", "final"),
    ]
    assert pieces("Okay. Red wine - or white - is fine.", clause_chars=5)[1] == (
        " Red wine -",
        "clause",
    )
    # Unspaced hyphens and en dashes are words and ranges, not clauses.
    assert pieces("Okay. A well-known 1–3 range.", clause_chars=1)[1][1] == "final"


def test_forced_cut_at_a_space() -> None:
    words = " ".join(["alpha", "beta", "gamma", "delta", "omega"] * 14)  # 419 chars
    result = chunk(f"Okay. Then {words}")
    assert [c.kind for c in result] == ["first", "forced", "final"]
    forced = result[1]
    assert forced.text.startswith(" Then alpha")
    assert len(forced.text.lstrip()) <= 250
    assert result[2].text.startswith(" ")  # cut at the whitespace: it goes to the next piece
    assert "".join(c.text for c in result) == f"Okay. Then {words}"


def test_forced_cut_avoids_function_words() -> None:
    words = ("the cat sat on the mat " * 20).strip()
    result = chunk(f"Okay. {words}")
    assert result[1].kind == "forced"
    assert result[1].text.rsplit(" ", 1)[-1] in {"cat", "sat", "mat"}


def test_hard_cut_without_spaces() -> None:
    blob = "x" * 300
    result = chunk(f"Okay. {blob}")
    assert [(c.text, c.kind) for c in result] == [
        ("Okay.", "first"),
        (" " + "x" * 250, "forced"),  # leading whitespace does not count towards max_chars
        ("x" * 50, "final"),
    ]
    assert [(c.text, c.kind) for c in chunk(blob)] == [("x" * 250, "first"), ("x" * 50, "final")]


def test_unbalanced_quote_is_bounded_by_max_chars() -> None:
    text = 'Okay. He said "this never closes. ' + "More words here. " * 30
    result = chunk(text)
    assert all(len(c.text.lstrip()) <= 250 for c in result)
    assert result[1].kind == "forced"


MARKDOWN = [
    (
        "**Bold** claim. _Next_ one.",
        {},
        [("Bold claim.", "first", 0, 15), (" Next one.", "final", 15, 27)],
    ),
    (
        "# Title\n- item one\n- item two\n",
        {},
        [
            ("Title\n", "first", 0, 8),
            ("item one\n", "sentence", 8, 19),
            ("item two\n", "sentence", 19, 30),
        ],
    ),
    (
        "Run this:\n```py\nprint(1)\n```\nDone.",
        {},
        [("Run this:\n", "first", 0, 10), ("\nDone.", "final", 10, 34)],
    ),
    (
        "Run this:\n```py\nprint(1)\n```\nDone.",
        {"code_block_text": "Here is the code."},
        [
            ("Run this:\n", "first", 0, 10),
            ("Here is the code.", "sentence", 10, 16),  # spans the opening fence line
            ("\nDone.", "final", 16, 34),
        ],
    ),
    (
        "Read [the docs](https://x.com/a_(b)) now. Then go.",
        {},
        [
            ("Read the docs", "first", 0, 14),
            (" now.", "sentence", 14, 41),
            (" Then go.", "final", 41, 50),
        ],
    ),
    (
        "Okay. **Done.**",
        {},
        [("Okay.", "first", 0, 5), (" Done.", "final", 5, 15)],
    ),
]


@pytest.mark.parametrize(("text", "options", "expected"), MARKDOWN)
def test_markdown_offsets(
    text: str, options: dict[str, Any], expected: list[tuple[str, str, int, int]]
) -> None:
    for result in (chunk(text, **options), chunk_tokens(list(text), **options)):
        assert [(c.text, c.kind, c.start, c.end) for c in result] == expected


def test_markdown_off_passes_text_through() -> None:
    text = "**Bold** _x_ [a](b).\n- item"
    result = chunk(text, markdown=False)
    assert "".join(c.text for c in result) == text
    assert result[-1].end == len(text)


def test_flush_drops_a_whitespace_only_remainder() -> None:
    chunker = SpeechChunker()
    assert [c.text for c in chunker.feed("Hi there. How are you? ")] == [
        "Hi there.",
        " How are you?",
    ]
    assert chunker.flush() == []


def test_flush_extends_the_last_piece_to_the_raw_end() -> None:
    chunker = SpeechChunker()
    assert chunker.feed("Okay. It was 10 a.m.**  ") == [SpeechChunk("Okay.", "first", 0, 5)]
    assert chunker.flush() == [SpeechChunk(" It was 10 a.m.", "final", 5, 24)]


def test_flush_on_empty_stream() -> None:
    assert SpeechChunker().flush() == []
    assert chunk("   \n ") == []


def test_reuse_after_flush() -> None:
    chunker = SpeechChunker()
    first = chunker.feed("One. Two") + chunker.flush()
    second = chunker.feed("One. Two") + chunker.flush()
    assert (
        first
        == second
        == [
            SpeechChunk("One.", "first", 0, 4),
            SpeechChunk(" Two", "final", 4, 8),
        ]
    )


def test_reuse_after_flush_mid_markup() -> None:
    chunker = SpeechChunker()
    chunker.feed("Look: ```\ncode")
    chunker.flush()
    assert chunker.feed("*Fresh* start here. Next") == [
        SpeechChunk("Fresh start here.", "first", 0, 19)
    ]


def test_first_chunk_released_on_the_next_feed() -> None:
    chunker = SpeechChunker()
    assert chunker.feed("Sure.") == []  # "Sure.Net"? wait for the next character
    assert chunker.feed(" Here") == [SpeechChunk("Sure.", "first", 0, 5)]
    assert chunker.flush() == [SpeechChunk(" Here", "final", 5, 10)]


def test_first_chunk_within_five_tokens() -> None:
    sentence = "Today we will explore the long and winding history of the Roman Empire."
    tokens = [sentence.split(" ")[0]] + [" " + w for w in sentence.split(" ")[1:]]
    chunker = SpeechChunker()
    released_at = next(i for i, tok in enumerate(tokens) if chunker.feed(tok))
    assert released_at < 5


def test_invalid_options() -> None:
    with pytest.raises(ValueError):
        SpeechChunker(max_chars=0)
    with pytest.raises(ValueError):
        SpeechChunker(first_chunk_words=0)

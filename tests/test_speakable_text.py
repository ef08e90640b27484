"""Speakable text: URLs, e-mail addresses, emoji and symbols, pipe tables, headings
and list items — what the voice is given, case by case and as properties."""

# Symbols, emoji and curly quotes are test data here.
# ruff: noqa: RUF001

from __future__ import annotations

import re
import unicodedata
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.chunking import (
    Segment,
    SpeakableFilter,
    SpeechChunk,
    SpeechChunker,
    SpeechText,
    TableFilter,
)
from voice_membrane.chunking.speakable import host_of
from voice_membrane.pipeline.config import ConfigError, PipelineConfig, load_pipeline


def chunks(text: str | list[str], **options: Any) -> list[SpeechChunk]:
    chunker = SpeechChunker(**options)
    out: list[SpeechChunk] = []
    for piece in [text] if isinstance(text, str) else text:
        out += chunker.feed(piece)
    return out + chunker.flush()


def said(text: str, **options: Any) -> str:
    """What the voice is given, fed one character at a time."""
    return "".join(c.text for c in chunks(list(text), **options))


def pieces(text: str, **options: Any) -> list[str]:
    return [c.text for c in chunks(list(text), **options)]


# -- URLs and e-mail addresses ---------------------------------------------------------

URL_CASES = [
    ("Reset at https://help.example.com/reset?x=1 today.", "Reset at help.example.com today."),
    ("See http://example.org.", "See example.org."),
    ("Track it at https://track.example.com/pkg/88231. It comes Thursday.",
     "Track it at track.example.com. It comes Thursday."),
    ("Go to www.example.org/docs/v3.2/install, then Start.", "Go to example.org, then Start."),
    ("Open help.example.com/reset?x=1 now", "Open help.example.com now"),
    ("Login at https://user:secret@intranet.example.com:8443/a", "Login at intranet.example.com"),
    ("(see https://en.wikipedia.org/wiki/Foo_(bar))", "(see en.wikipedia.org)"),
    ("Autolink <https://x.example.io/a> here", "Autolink x.example.io here"),
    ('He said "https://a.example.com/x?" twice', 'He said "a.example.com?" twice'),
    ("ftp://files.example.net/pub/a.zip is old", "files.example.net is old"),
    ("Read [the guide](https://help.example.com/setup) first.", "Read the guide first."),
    ("Link [https://x.example.com/a/b](https://x.example.com/a/b).", "Link x.example.com."),
    ("Use `https://api.example.com/v1` as the base", "Use api.example.com as the base"),
    # Not URLs: said as they are.
    *[(same, same) for same in ["It's example.com, or and/or, or node.js/npm.",
                                "Edit README.md/x and 3.5/4 and http:// alone"]],
]  # fmt: skip

EMAIL_CASES = [
    ("Send it to support@example.com today.", "Send it to support at example.com today."),
    ("Mail anna.lee@work.example.", "Mail anna.lee at work.example."),
    ("Write to <mailto:help@example.org>.", "Write to help at example.org."),
    ("Ping @username or a@b", "Ping @username or a@b"),
]


@pytest.mark.parametrize(("raw", "expected"), URL_CASES + EMAIL_CASES)
def test_urls_and_addresses(raw: str, expected: str) -> None:
    assert said(raw) == expected
    assert "".join(c.text for c in chunks(raw)) == expected


def test_urls_off_keeps_them() -> None:
    raw = "See https://help.example.com/reset?x=1 or mail a@example.com."
    assert said(raw, urls=False) == raw


def test_a_url_is_one_substitution_spanning_it() -> None:
    raw = "Go to https://help.example.com/reset now. Then wait."
    out = chunks(raw)
    assert [c.text for c in out] == ["Go to help.example.com", " now.", " Then wait."]
    assert out[0].end == raw.index(" now")  # the host stands for the whole URL


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://help.example.com/reset?x=1", "help.example.com"),
        ("HTTP://WWW.Example.COM", "Example.COM"),
        ("https://a:b@c.example.com:99#frag", "c.example.com"),
        ("www.example.org", "example.org"),
    ],
)
def test_host_of(url: str, host: str) -> None:
    assert host_of(url) == host


# -- emoji and symbols -------------------------------------------------------------

SYMBOL_CASES = [
    ("Great job🎉Let's go.", "Great job Let's go."),
    ("Great job 🎉 Let's go.", "Great job Let's go."),
    ("🎉 Done!", "Done!"),
    ("Done 👍🏽!", "Done !"),
    ("Done👍🏽!", "Done!"),
    ("The family 👨‍👩‍👧 is here", "The family is here"),
    ("Paris 🇫🇷 and Scotland 🏴󠁧󠁢󠁳󠁣󠁴󠁿 trips", "Paris and Scotland trips"),
    ("Press 1️⃣ now", "Press 1 now"),
    ("Press 1️⃣now", "Press 1 now"),
    ("✓ Saved\n★ Starred\n• Bullet", "Saved\nStarred\nBullet"),
    ("Settings → Privacy ⇒ Clear", "Settings Privacy Clear"),
    ("┌──┐ box", "box"),
    ("Heart❤️love", "Heart love"),
    # Kept: a voice reads them meaningfully.
    *[(same, same) for same in ["It's 20 °C, 50% off, $5 & €3, 2 + 2 = 4, ±1, 3×3, № 5",
                                "Café, naïve, 好的。"]],
]  # fmt: skip


@pytest.mark.parametrize(("raw", "expected"), SYMBOL_CASES)
def test_symbols(raw: str, expected: str) -> None:
    assert said(raw) == expected
    assert "".join(c.text for c in chunks(raw)) == expected


def test_symbols_off_keeps_them() -> None:
    raw = "Great job 🎉 ✓ → done"
    assert said(raw, symbols=False) == raw


def test_an_emoji_alone_says_nothing() -> None:
    assert chunks("🎉👍🏽") == []


def test_filter_segments_keep_raw_spans() -> None:
    raw = "Go to https://a.example.com/x 🎉 now"
    f = SpeakableFilter()
    out = f.feed([Segment(raw, 0, len(raw))]) + f.flush()
    assert out == [
        Segment("Go to ", 0, 6),
        Segment("a.example.com", 6, 29),  # the host stands for the whole URL
        Segment(" ", 29, 30),
        Segment("now", 32, 35),  # the emoji and its space are dropped
    ]


def test_a_word_too_long_for_a_url_is_not_held() -> None:
    f = SpeakableFilter()
    assert f.feed([Segment("x" * 2047, 0, 2047)]) == []  # may yet become an address
    assert "".join(s.text for s in f.feed([Segment("x", 2047, 2048)])) == "x" * 2048
    assert f.feed([Segment("@example.com", 2048, 2060)]) == [Segment("@example.com", 2048, 2060)]


def test_a_line_too_long_for_a_table_row_is_not_held() -> None:
    f = TableFilter()
    assert f.feed([Segment("|" + "x" * 4094, 0, 4095)]) == []
    assert f.feed([Segment("x", 4095, 4096)]) != []


# -- tables ----------------------------------------------------------------------

TABLE = (
    "Here is the forecast:\n"
    "| City | High | Sky |\n"
    "|:-----|-----:|:---:|\n"
    "| **Paris** | 12 °C | sunny |\n"
    "| London | 9 °C | |\n"
    "\n"
    "Take an umbrella."
)

TABLE_CASES = [
    (TABLE, {}, ["Here is the forecast:", "\nParis: High 12 °C, Sky sunny.", "\nLondon: High 9 °C.",
                 "\n\nTake an umbrella."]),
    (TABLE, {"tables": "skip"}, ["Here is the forecast:", "\n\nTake an umbrella."]),
    (TABLE, {"tables": "skip", "table_text": "See the table."},
     ["Here is the forecast:", "\nSee the table.", "\n\nTake an umbrella."]),
    # A table with no row says its header.
    ("| City | High |\n|---|---|\n\nOk.", {}, ["City, High.", "\n\nOk."]),
    # A table ends at the first line that does not start with "|".
    ("| a | b |\n|---|---|\n| 1 | 2 |\nThat is all.", {}, ["1: b 2.", "\nThat is all."]),
    # One column; a stray delimiter row inside; an empty row.
    ("| Step |\n| --- |\n| Open |\n|---|\n| |\n| Close |\n", {}, ["Open.", "\nClose."]),
    # A pipe in prose is not a table, nor a pipe line without a delimiter row.
    ("Type a | b to pipe it.", {}, ["Type a | b", " to pipe it."]),
    ("| not a table\nnext line", {}, ["| not a table\n", "next line"]),
    ("| a | b |\n| c | d |\n", {}, ["| a | b |\n", "| c | d |\n"]),
    # A delimiter row with a different number of cells is no delimiter row.
    ("| a | b |\n|---|\nok", {}, ["| a | b |\n", "|---|\n", "ok"]),
    # Tables are markdown: with markdown off they pass through.
    ("| a | b |\n|---|---|\n", {"markdown": False}, ["| a | b |\n", "|---|---|\n"]),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "options", "expected"), TABLE_CASES)
def test_tables(raw: str, options: dict[str, Any], expected: list[str]) -> None:
    assert pieces(raw, **options) == expected
    assert [c.text for c in chunks(raw, **options)] == expected


def test_a_table_row_is_spoken_before_the_table_ends() -> None:
    chunker = SpeechChunker()
    released = chunker.feed("| City | High |\n|---|---|\n| Paris | 12 |\n")
    assert [c.text for c in released] == ["Paris: High 12."]
    released = chunker.feed("| Oslo | 3 |\n| Rome")
    assert [c.text for c in released] == ["\nOslo: High 3."]
    assert [c.text for c in chunker.flush()] == ["\nRome."]


def test_table_filter_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="rows"):
        TableFilter(mode="cells")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rows"):
        SpeechChunker(tables="cells")  # type: ignore[arg-type]


# -- headings and list items ------------------------------------------------------

BREAK_CASES = [
    ("## Steps\nOpen the lid.", ["Steps.", "\nOpen the lid."]),
    ("# Steps:\nOpen the lid.", ["Steps:\n", "Open the lid."]),
    ("- Milk\n- Eggs\nThat is all.", ["Milk.", "\nEggs.", "\nThat is all."]),
    ("1. Open it\n2) Close it\nDone.", ["1. Open it.", "\n2) Close it.", "\nDone."]),
    ('- Say "hi."\n- Wave (twice)\n', ['Say "hi."', "\nWave (twice)."]),
    ("Intro first.\n## Next part\nMore text.", ["Intro first.", "\nNext part.", "\nMore text."]),
    # Not items: a year, a hashtag.
    ("2024 was long\nNext", ["2024 was long\n", "Next"]),
    ("#1 fan\nNext", ["#1 fan\n", "Next"]),
]


@pytest.mark.parametrize(("raw", "expected"), BREAK_CASES)
def test_headings_and_items_end_a_piece(raw: str, expected: list[str]) -> None:
    assert pieces(raw) == expected


# -- the pipeline file -------------------------------------------------------------


def test_pipeline_file_keys_reach_the_chunker(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[chunker]\ntables = "skip"\ntable_text = "A table."\nurls = false\nsymbols = false\n'
    )
    config = load_pipeline(path)
    options = config.chunker.model_dump()
    assert options["tables"] == "skip" and options["table_text"] == "A table."
    chunker = SpeechChunker(**options)
    out = chunker.feed("| a | b |\n|---|---|\n| 1 | 2 |\nhttps://x.example.com/a 🎉")
    out += chunker.flush()
    assert "".join(c.text for c in out) == "A table.\nhttps://x.example.com/a 🎉"
    assert PipelineConfig().chunker.tables == "rows"


def test_pipeline_file_rejects_a_bad_table_mode(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[chunker]\ntables = "cells"\n')
    with pytest.raises(ConfigError, match=r"chunker\.tables: Input should be 'rows' or 'skip'"):
        load_pipeline(path)


# -- properties --------------------------------------------------------------------

_WORDS = ["alpha", "Paris", "open", "the", "lid", "rain", "Zoë", "twelve", "done", "Oslo"]
_URLS = [
    "https://help.example.com/reset?x=1", "http://u:p@example.org:8080/a/b", "www.example.net/docs",
    "example.com/path", "(https://x.example.io/a_(b))", "<https://autolink.example.dev/x>",
    "https://track.example.com/pkg/88231.",
]  # fmt: skip
_EMAILS = ["support@example.com", "mailto:anna.lee@work.example", "me@example.org."]
_SYMBOLS = [
    "🎉", "👍🏽", "👨‍👩‍👧", "🇫🇷", "1️⃣", "✓", "★", "•", "→", "─", "❤️", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "\ufffd", "⬆️",
]  # fmt: skip


@st.composite
def speakable_reply(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A reply mixing prose, URLs, addresses, symbols, tables, headings and lists, and
    the prose words that must all be said, in order."""
    text, words = "", []

    def word() -> str:
        w = draw(st.sampled_from(_WORDS))
        words.append(w)
        return w

    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["prose", "prose", "url", "email", "symbol", "table", "item"]))
        if kind == "prose":
            text += " ".join(word() for _ in range(draw(st.integers(1, 4))))
            text += draw(st.sampled_from([". ", ", ", " ", "! ", "\n"]))
        elif kind in ("url", "email"):
            text += draw(st.sampled_from(_URLS if kind == "url" else _EMAILS))
            text += draw(st.sampled_from([" ", "\n", ", "]))
        elif kind == "symbol":
            # Glued to a word or standing alone: either way no word is lost or joined.
            text += draw(st.sampled_from(["", " "])) + draw(st.sampled_from(_SYMBOLS))
            text += draw(st.sampled_from(["", " "])) + word() + " "
        elif kind == "table":
            # Said: each row as "first: header cell, header cell." (the first column's
            # header unsaid), or the header alone if no row follows.
            columns = draw(st.integers(1, 3))
            header = [draw(st.sampled_from(_WORDS)) for _ in range(columns)]
            text += "\n| " + " | ".join(header) + " |\n|" + "---|" * columns + "\n"
            rows = draw(st.integers(0, 3))
            for _ in range(rows):
                cells = [draw(st.sampled_from(_WORDS)) for _ in range(columns)]
                text += "| " + " | ".join(f"**{cell}**" for cell in cells) + " |\n"
                words.append(cells[0])
                for name, cell in zip(header[1:], cells[1:], strict=True):
                    words += [name, cell]
            if not rows:
                words += header
            text += draw(st.sampled_from(["\n", ""]))
        else:
            text += "\n" + draw(st.sampled_from(["## ", "- ", "* ", "1. ", "> "]))
            text += " ".join(word() for _ in range(draw(st.integers(1, 3)))) + "\n"
    return text, words


@st.composite
def split(draw: st.DrawFn, text: str) -> list[str]:
    if draw(st.booleans()):
        return list(text)
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=30)))
    return [text[a:b] for a, b in pairwise([0, *cuts, len(text)])]


OPTIONS: list[dict[str, Any]] = [
    {},
    {"max_chars": 30, "clause_chars": 10},
    {"tables": "skip", "table_text": "A table."},
    {"first_chunk_words": 1, "min_clause_words": 0, "max_chars": 15},
]


def _said_words(spoken: str) -> list[str]:
    return re.findall(r"\w+", spoken)


def _is_subsequence(needle: list[str], haystack: list[str]) -> bool:
    rest = iter(haystack)
    return all(w in rest for w in needle)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), case=speakable_reply(), options=st.sampled_from(OPTIONS))
def test_any_split_gives_the_same_pieces(
    data: st.DataObject, case: tuple[str, list[str]], options: dict[str, Any]
) -> None:
    text, _ = case
    assert chunks(data.draw(split(text)), **options) == chunks(text, **options)


@settings(max_examples=200, deadline=None)
@given(case=speakable_reply(), options=st.sampled_from(OPTIONS[:2] + OPTIONS[3:]))
def test_no_prose_word_is_lost(case: tuple[str, list[str]], options: dict[str, Any]) -> None:
    text, words = case
    spoken = "".join(c.text for c in chunks(text, **options))
    assert _is_subsequence(words, _said_words(spoken)), spoken


@settings(max_examples=200, deadline=None)
@given(case=speakable_reply(), options=st.sampled_from(OPTIONS))
def test_no_markup_url_or_symbol_is_spoken(
    case: tuple[str, list[str]], options: dict[str, Any]
) -> None:
    text, _ = case
    for c in chunks(text, **options):
        assert not re.search(r"\||://|@|\*\*|---|^\s*#|www\.|/", c.text), c.text
        for ch in c.text:
            assert unicodedata.category(ch) not in ("So", "Co", "Me", "Cf"), (ch, c.text)
            assert ch not in "\ufe0f•→", (ch, c.text)


@settings(max_examples=200, deadline=None)
@given(case=speakable_reply(), options=st.sampled_from(OPTIONS))
def test_speech_text_is_what_the_pieces_say(
    case: tuple[str, list[str]], options: dict[str, Any]
) -> None:
    text, _ = case
    filter_options = {k: v for k, v in options.items() if k in ("tables", "table_text")}
    speech = SpeechText(**filter_options)
    segments = speech.feed(text) + speech.flush()
    output = "".join(s.text for s in segments)
    spoken = "".join(c.text for c in chunks(text, **options))
    assert output.startswith(spoken) and not output[len(spoken) :].strip()
    previous_end = 0
    for seg in segments:  # spans run forward through the raw text
        assert previous_end <= seg.end <= len(text)
        previous_end = seg.end

"""StopScanner: client-side stop sequences, whatever the stream's split."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from voice_membrane.parse import StopScanner

STOPS = ["<|eot|>", "\nUser:", "</function_calls>"]
TEXT = st.lists(
    st.one_of(st.text(alphabet="ab\n:<|>U", max_size=6), st.sampled_from([*STOPS, "<|eo", "\nUs"])),
    max_size=8,
).map("".join)


def scan(text: str, cuts: list[int]) -> tuple[str, str | None]:
    scanner = StopScanner(STOPS)
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    out = "".join(scanner.feed(text[a:b]) for a, b in itertools.pairwise(points))
    return out + scanner.flush(), scanner.stopped


def reference(text: str) -> tuple[str, str | None]:
    hits = [(text.find(s), s) for s in STOPS if s in text]
    if not hits:
        return text, None
    at, stop = min(hits)
    return text[:at], stop


@given(TEXT, st.lists(st.integers(0, 60), max_size=6))
def test_any_split_releases_the_text_before_the_first_stop(text: str, cuts: list[int]) -> None:
    assert scan(text, cuts) == reference(text)


def test_partial_stop_is_held_until_decided() -> None:
    scanner = StopScanner(["<|eot|>"])
    assert scanner.feed("Hi <|e") == "Hi "
    assert scanner.feed("xtra") == "<|extra"
    assert scanner.feed(" bye<|eot|> more") == " bye" and scanner.stopped == "<|eot|>"
    assert scanner.feed("ignored") == "" and scanner.flush() == ""

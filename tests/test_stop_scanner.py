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


def scan(text: str, cuts: list[int], stops: list[str] = STOPS) -> tuple[str, str | None]:
    scanner = StopScanner(stops)
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    out = "".join(scanner.feed(text[a:b]) for a, b in itertools.pairwise(points))
    return out + scanner.flush(), scanner.stopped


def reference(text: str, stops: list[str] = STOPS) -> tuple[str, str | None]:
    """As a server checks after each character: the first stop to be complete."""
    for end in range(len(text) + 1):
        done = [s for s in stops if s and text[:end].endswith(s)]
        if done:
            stop = max(done, key=len)
            return text[: end - len(stop)], stop
    return text, None


@given(TEXT, st.lists(st.integers(0, 60), max_size=6))
def test_any_split_releases_the_text_before_the_first_stop(text: str, cuts: list[int]) -> None:
    assert scan(text, cuts) == reference(text)


@given(
    st.text(alphabet="abc", max_size=24),
    st.lists(st.text(alphabet="abc", min_size=1, max_size=4), min_size=1, max_size=4),
    st.lists(st.integers(0, 30), max_size=6),
)
def test_overlapping_stops_end_where_the_first_one_completes(
    text: str, stops: list[str], cuts: list[int]
) -> None:
    # Stops that contain or overlap one another ("ab" inside "cab"): the result
    # must not depend on where the text was cut.
    assert scan(text, cuts, stops) == reference(text, stops)


def test_a_stop_inside_a_longer_one_ends_the_text_where_it_completes() -> None:
    assert scan("Hi\nUser: x", [], ["\nUser:", "User"]) == ("Hi\n", "User")
    assert scan("Hi\nUser: x", [5], ["\nUser:", "User"]) == ("Hi\n", "User")


def test_partial_stop_is_held_until_decided() -> None:
    scanner = StopScanner(["<|eot|>"])
    assert scanner.feed("Hi <|e") == "Hi "
    assert scanner.feed("xtra") == "<|extra"
    assert scanner.feed(" bye<|eot|> more") == " bye" and scanner.stopped == "<|eot|>"
    assert scanner.feed("ignored") == "" and scanner.flush() == ""

"""Where two pieces of text meet (spoken pieces, text blocks, an STT's finals
and words): words apart, punctuation attached — "Paris.", never "Paris ."."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from voice_membrane.vocab.spacing import CLOSING, OPENING, join_words, spaced

WORDS = st.text(st.characters(categories=("L", "N")), min_size=1, max_size=8)
TOKENS = st.lists(
    st.one_of(WORDS, st.sampled_from(sorted(CLOSING)), st.sampled_from(sorted(OPENING))),
    max_size=20,
)


@given(TOKENS)
def test_punctuation_attaches_and_words_stay_apart(tokens: list[str]) -> None:
    joined = join_words(tokens)
    assert joined.replace(" ", "") == "".join(tokens)  # nothing but spaces added
    for i, ch in enumerate(joined):
        if ch in CLOSING:
            assert joined[i - 1 : i] != " ", joined  # "Paris." not "Paris ."
        if ch in OPENING:
            assert joined[i + 1 : i + 2] != " ", joined  # "(Paris" not "( Paris"
    for left, right in pairwise(tokens):
        if left[-1].isalnum() and right[0].isalnum():
            assert f"{left} {right}" in joined  # two words: one space between


def test_the_cases_seen() -> None:
    assert join_words(["what is the weather in Paris", "?"]) == "what is the weather in Paris?"
    assert join_words(["It rains in Paris", ". Take a coat."]) == "It rains in Paris. Take a coat."
    assert join_words(["I said", "(twice)", "hello", ","]) == "I said (twice) hello,"
    assert join_words(["one ", "two", "", " three"]) == "one two three"
    assert not spaced("Paris", ".") and spaced("Paris", "Texas") and not spaced("a ", "b")

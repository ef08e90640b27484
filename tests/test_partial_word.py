"""The unfinished last word of a reply cut off by an error (pipeline.partial_word)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.pipeline.partial_word import ends_mid_word, without_partial_word


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("The firs", "The "),
        ("The first.", "The first."),
        ("The first ", "The first "),
        ("Hello, wor", "Hello, "),
        ("It costs 4", "It costs "),
        ("I don'", "I "),
        ("I don\u2019", "I "),
        ("Say “hi”", "Say “hi”"),
        ("Hello.Wor", "Hello."),
        ("今日は晴れです。明日", "今日は晴れです。"),
        ("Naïve café", "Naïve "),
        ("word", ""),
        ("", ""),
    ],
)
def test_the_trailing_word_is_removed_only_when_it_may_go_on(text: str, kept: str) -> None:
    assert without_partial_word(text) == kept
    assert ends_mid_word(text) == (kept != text)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_what_is_kept_is_a_prefix_that_ends_on_a_finished_word(text: str) -> None:
    kept = without_partial_word(text)
    assert text.startswith(kept)
    assert not ends_mid_word(kept)
    assert without_partial_word(kept) == kept

"""Word error rate (listening/wer.py): normalisation and the edit counts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voice_membrane.listening.wer import NO_ERRORS, normalize, wer, word_errors

WORDS = st.lists(st.sampled_from(["what", "time", "is", "it", "ten", "Paris", "10", "mm-hm"]))
TEXT = WORDS.map(" ".join)


def test_normalize_case_punctuation_numbers() -> None:
    assert normalize("Set a timer for 10 minutes.") == [
        "set",
        "a",
        "timer",
        "for",
        "ten",
        "minutes",
    ]
    assert normalize("Wait, no!  Don't.") == ["wait", "no", "don't"]
    assert normalize("mm-hm") == ["mm", "hm"]
    assert normalize("42 and 99 and 100") == ["forty", "two", "and", "ninety", "nine", "and", "100"]
    assert normalize("WHAT\u2019S up") == ["what's", "up"]


def test_counts_each_kind_of_edit() -> None:
    e = word_errors("what time is it", "what the time is")
    assert (e.substitutions, e.deletions, e.insertions) == (0, 1, 1)
    e = word_errors("tell me a joke", "tell me the job")
    assert (e.substitutions, e.deletions, e.insertions, e.reference_words) == (2, 0, 0, 4)
    assert wer("tell me a joke", "tell me the job") == 0.5
    assert wer("how far is the moon", "") == 1.0
    assert wer("", "") == 0.0
    assert wer("", "uh huh") == 2.0  # silence heard as words counts
    assert wer("Set a timer for 10 minutes.", "set a timer for ten minutes") == 0.0


def test_totals_weigh_files_by_their_words() -> None:
    total = word_errors("a b c d", "a b c d") + word_errors("x y", "x") + NO_ERRORS
    assert total.edits == 1 and total.reference_words == 6
    assert abs(total.wer - 1 / 6) < 1e-12


@given(TEXT)
def test_a_text_against_itself_is_zero(text: str) -> None:
    assert wer(text, text) == 0.0
    assert word_errors(text, text).edits == 0


@given(TEXT, TEXT)
def test_edit_counts_are_bounded_and_symmetric(ref: str, hyp: str) -> None:
    forward, backward = word_errors(ref, hyp), word_errors(hyp, ref)
    n, m = len(normalize(ref)), len(normalize(hyp))
    assert forward.edits == backward.edits  # Levenshtein is a distance
    # Deletions one way are insertions the other way.
    assert forward.deletions - forward.insertions == n - m
    assert backward.insertions - backward.deletions == n - m
    assert abs(n - m) <= forward.edits <= max(n, m)
    assert forward.substitutions + forward.deletions <= n
    assert forward.substitutions + forward.insertions <= m
    assert forward.substitutions == backward.substitutions


@given(TEXT, TEXT, TEXT)
def test_triangle_inequality(a: str, b: str, c: str) -> None:
    assert word_errors(a, c).edits <= word_errors(a, b).edits + word_errors(b, c).edits

"""PhraseGuard's properties: for any banned phrase disguised in any of the ways
the speakable filters or a listener's eye undo, split anywhere, the text the
voice is given never says it; text without a phrase passes unchanged; and on
the chunker's corpus a realistic banned list changes nothing, not even when
the first piece goes out."""

# Disguised letters are this file's subject.
# ruff: noqa: RUF001

from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import astuple

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.chunker import run_corpus
from benchmarks.replies import REPLIES
from voice_membrane.chunking import PhraseGuard, SpeechChunk, SpeechChunker

WORDS = ["secret", "plan", "red", "fox", "go", "now"]  # what phrases are made of
FILLER = [*WORDS, "the", "a", "is", "sea", "secretive", "planet", "redo", "foxes", "goes", "3.5"]

# Look-alikes the test disguises letters with, and reads back (its own table, not
# the guard's: the check must not share the guard's folding).
LOOKALIKES = {
    "a": "аα",
    "c": "сϲ",
    "e": "еε",
    "o": "оοօ",
    "p": "рρ",
    "x": "хχ",
    "s": "ѕ",
    "r": "г",
    "d": "ԁ",
    "n": "ո",
    "l": "ӏ",
    "w": "ԝ",
}
READ_BACK = {ord(fake): real for real, fakes in LOOKALIKES.items() for fake in fakes}
INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"


def heard(text: str) -> str:
    """What a listener takes the voice to say: look-alikes read as the letters
    they mimic, compatibility forms as theirs, invisible characters unseen,
    case ignored, anything but letters and digits a space."""
    text = unicodedata.normalize("NFKC", text.translate(READ_BACK))
    text = text.translate(dict.fromkeys(map(ord, INVISIBLE))).casefold()
    return " " + " ".join(re.findall(r"[^\W_]+", text)) + " "


def says(text: str, phrase: str) -> bool:
    return f" {phrase} " in heard(text)


def _fullwidth(word: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) for c in word)


def _bold(word: str) -> str:
    return "".join(chr(0x1D41A + ord(c) - ord("a")) for c in word)


def _lookalike(word: str) -> str:
    return "".join(LOOKALIKES.get(c, c)[-1] for c in word)


@st.composite
def disguised_word(draw: st.DrawFn, word: str) -> str:
    inside = draw(st.integers(1, len(word) - 1))
    kind = draw(st.integers(0, 12))
    if kind == 0:
        return word
    if kind == 1:
        return draw(st.sampled_from([word.upper(), word.title(), word.swapcase()]))
    if kind == 2:
        return _lookalike(word)
    if kind == 3:
        return _fullwidth(word)
    if kind == 4:
        return _bold(word)
    if kind == 5:
        return word[:inside] + draw(st.sampled_from(INVISIBLE)) + word[inside:]
    if kind == 6:
        mark = draw(st.sampled_from(["**", "*", "`", "~~", "***", "_"]))
        return f"{mark}{word}{mark}"
    if kind == 7:
        return f"{word[:inside]}**{word[inside:]}**"
    if kind == 8:
        return f"[{word}](http://x.io/{word})"
    if kind == 9:
        return word[:inside] + "\u0336" + word[inside:]  # a combining overlay
    if kind == 10:
        return f"<https://{word}.example>"  # said as its host: "word.example"
    if kind == 11:
        return f"\u200b{word}\ufeff"
    return _lookalike(word.upper())


BETWEEN = [" ", "  ", "\n", " - ", "-", "_", ".", "/", " → ", "🎉", " 🎉 ", " • ", "\u200b "]
BETWEEN += [" \u2060", ", ", "\t", "⇒", " — ", "👍🏽", "... "]


@st.composite
def disguised_phrase(draw: st.DrawFn, phrase: str) -> str:
    words = phrase.split(" ")
    parts = [draw(disguised_word(word)) for word in words]
    text = parts[0]
    for part in parts[1:]:
        text += draw(st.sampled_from(BETWEEN)) + part
    wrap = draw(st.integers(0, 6))
    if wrap == 1:
        return f"\n# {text}\n"
    if wrap == 2:
        return f"\n- {text}\n"
    if wrap == 3:
        return f"[{text}](https://x.io)"
    if wrap == 4 and len(words) == 2:
        return f"https://{words[0]}.{words[1]}/p?q=1"  # a URL said as its host
    if wrap == 5 and len(words) >= 2:
        head, rest = words[0], " ".join(words[1:])
        return f"\n\n| Key | {head} |\n|---|---|\n| x | {rest} |\n\n"  # said "x: head rest."
    return text


PHRASES = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
SEPARATORS = st.sampled_from([" ", "  ", "\n", ". ", "! ", ", ", " - "])
FILL = st.lists(st.tuples(st.sampled_from(FILLER), SEPARATORS), max_size=6).map(
    lambda pairs: "".join(w + s for w, s in pairs)
)


def pieces(text: str, cuts: list[int], **options: object) -> list[SpeechChunk]:
    chunker = SpeechChunker(**options)  # type: ignore[arg-type]
    out: list[SpeechChunk] = []
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    for start, end in itertools.pairwise(bounds):
        out += chunker.feed(text[start:end])
    return out + chunker.flush()


def tile(text: str, said: list[SpeechChunk]) -> None:
    """The pieces still tile the raw text (a whitespace-only end may be left out)."""
    if said:
        assert said[0].start == 0 and said[-1].end <= len(text)
        assert all(a.end == b.start for a, b in itertools.pairwise(said))


@settings(max_examples=400, deadline=None)
@given(
    st.data(),
    PHRASES,
    st.lists(FILL, min_size=2, max_size=4),
    st.lists(st.integers(0, 10_000), max_size=12),
    st.sampled_from([("replace", "[cut]."), ("replace", ""), ("drop", "")]),
    st.sampled_from([250, 20]),
)
def test_a_disguised_phrase_never_reaches_the_voice_however_split(
    data: st.DataObject,
    phrase: str,
    fills: list[str],
    cuts: list[int],
    action: tuple[str, str],
    max_chars: int,
) -> None:
    text = fills[0]
    for fill in fills[1:]:
        text += " " + data.draw(disguised_phrase(phrase)) + " " + fill
    guard = PhraseGuard([phrase], action=action[0], replacement=action[1])  # type: ignore[arg-type]
    split = pieces(text, cuts, phrase_guard=guard, max_chars=max_chars)
    whole = pieces(text, [], phrase_guard=guard, max_chars=max_chars)
    assert [astuple(p) for p in split] == [astuple(p) for p in whole]
    tile(text, split)
    said = "".join(p.text for p in split)
    assert not says(said, phrase), (text, said)


@settings(max_examples=300, deadline=None)
@given(
    PHRASES,
    FILL,
    st.lists(st.integers(0, 10_000), max_size=12),
    st.sampled_from([("replace", "[cut]."), ("drop", "")]),
)
def test_text_without_the_phrase_passes_unchanged(
    phrase: str, text: str, cuts: list[int], action: tuple[str, str]
) -> None:
    unguarded = pieces(text, cuts)
    if says("".join(p.text for p in unguarded), phrase):
        return  # the filler made the phrase: that is the other test's case
    guard = PhraseGuard([phrase], action=action[0], replacement=action[1])  # type: ignore[arg-type]
    guarded = pieces(text, cuts, phrase_guard=guard)
    # The same pieces. (An end held until the flush is released by it: the last
    # piece may then be "final" and cover the whitespace after it.)
    assert [(p.text, p.start) for p in guarded] == [(p.text, p.start) for p in unguarded]
    assert [p.kind for p in guarded[:-1]] == [p.kind for p in unguarded[:-1]]


# What a voice product bans: slurs and profanity (some of them the start of
# ordinary words: "ass" of "pass", "butt" of "button", "nig" of "night"), and
# things an assistant must not say.
REALISTIC = [
    "damn",
    "hell",
    "shit",
    "fuck",
    "ass",
    "butt",
    "nig",
    "tit",
    "die in a fire",
    "kill yourself",
    "secret plan",
    "top secret",
    "stupid",
    "idiot",
    "shut up",
    "credit card number",
    "social security number",
]


def test_a_realistic_banned_list_changes_nothing_in_the_chunker_corpus() -> None:
    plain = re.compile(
        r"(?<!\w)(?:" + "|".join(re.escape(p) for p in REALISTIC) + r")(?!\w)", re.IGNORECASE
    )
    assert not any(plain.search(reply.text) for reply in REPLIES)  # none is really there
    guard = PhraseGuard(REALISTIC)
    guarded = run_corpus(lambda: SpeechChunker(phrase_guard=guard), REPLIES)
    later: list[int] = []
    for run, bare in zip(guarded, run_corpus(SpeechChunker, REPLIES), strict=True):
        assert run.pieces == bare.pieces, run.reply.text  # not a character changed
        assert run.first_token >= bare.first_token
        if run.first_token > bare.first_token:
            later.append(run.first_token - bare.first_token)
    # The first piece keeps its head start: only a sentence end followed by a word
    # that may begin a banned phrase ("Okay. I've …": "I" may be "idiot") waits
    # for that word's next characters (2 of the 101 replies, 2 tokens each).
    assert len(later) <= 3 and max(later, default=0) <= 2, later

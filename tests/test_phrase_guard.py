"""PhraseGuard: a banned phrase never reaches the voice, judged on the text the
voice is given (after markdown, tables, URLs and symbols are made speakable),
however it is disguised and however the stream is split; no more text is held
back than a phrase needs. The properties over random disguises and the corpus:
``test_phrase_guard_properties.py``."""

# Disguised letters are this file's subject.
# ruff: noqa: RUF001

from __future__ import annotations

import itertools

import pytest

from voice_membrane import PhraseGuard as PublicPhraseGuard
from voice_membrane.chunking import PhraseGuard, SpeechChunker, SpeechText
from voice_membrane.chunking.phrase_filter import HOLD_MAX
from voice_membrane.chunking.skeleton import skeleton

PHRASES = ["secret plan", "damn"]
GUARD = PhraseGuard(PHRASES, replacement="[no].")


def speak(text: str, size: int, guard: PhraseGuard = GUARD, **options: object) -> str:
    """The pieces the chunker gives the voice, joined."""
    chunker = SpeechChunker(phrase_guard=guard, **options)  # type: ignore[arg-type]
    pieces = []
    for i in range(0, len(text), size):
        pieces += chunker.feed(text[i : i + size])
    pieces += chunker.flush()
    return "".join(piece.text for piece in pieces)


def said_everywhere(text: str, **options: object) -> str:
    """What the voice gets, the same for every split of ``text``."""
    whole = speak(text, max(1, len(text)), **options)  # type: ignore[arg-type]
    for size in (1, 2, 3, 7):
        assert speak(text, size, **options) == whole, size  # type: ignore[arg-type]
    return whole


@pytest.mark.parametrize(
    ("text", "said"),
    [
        # Case and spacing ignored; the phrase and the rest of its sentence replaced.
        ("Hi. The Secret\n  plan is out. Bye.", "Hi. The [no]. Bye."),
        ("Damn! That hurt.", "[no]. That hurt."),
        # Whole words only.
        ("A damnation and a classy damsel.", "A damnation and a classy damsel."),
        ("Damned if I know. Secret plans.", "Damned if I know. Secret plans."),
        # At the very end of the stream.
        ("Oh damn", "Oh [no]."),
        # A decimal point is not a sentence end: the sentence goes on to its end.
        ("Damn it costs 3.5 euros. Fine.", "[no]. Fine."),
        # A line break ends what is dropped with the phrase.
        ("damn it\nFine.", "[no].\nFine."),
        # No phrase: unchanged, every character.
        ("Plain text, nothing to see.\nReally.", "Plain text, nothing to see.\nReally."),
    ],
)
def test_cases(text: str, said: str) -> None:
    assert said_everywhere(text) == said


# Each member of the class: a disguise that the speakable filters, the TTS
# engine or a listener's eye turns back into the phrase.
DISGUISED = [
    # markdown around or inside words
    "The **secret** plan is out.",
    "The *secret* _plan_ is out.",
    "The sec**ret** pl*an* is out.",
    "The `secret` plan is out.",
    "The ~~secret~~ plan is out.",
    "The ***secret plan*** is out.",
    # links, autolinks and URLs whose host is the words
    "Read [secret](http://x.io/a) plan now.",
    "Read [the secret plan](https://example.com) now.",
    "Read <https://secret.plan/x> now.",
    "Go to https://www.secret.plan/reset?x=1 now.",
    "Go to secret.plan/reset now.",
    # emoji, arrows, bullets between the words
    "The secret🎉plan is out.",
    "The secret 👍🏽 plan is out.",
    "The secret → plan is out.",
    "The secret ⇒ plan is out.",
    "The secret • plan is out.",
    "The secret✅plan is out.",
    # a table row said as a phrase, a heading, a list item
    "| Code | secret |\n|---|---|\n| x | plan |\n\nDone.",
    "| secret | plan |\n|---|---|\n\nDone.",
    "# Secret plan\nDone.",
    "- secret\n  plan is out.",
    # invisible characters inside and between the words
    "The se\u200bcret plan is out.",
    "The secret\u200d plan is out.",
    "The sec\u200cret plan is out.",
    "The secret\u2060plan is out.",
    "The se\u00adcret pl\u00adan is out.",
    "The \ufeffsecret\ufeff plan is out.",
    "The secret\u200bplan is out.",
    "The s\u0336e\u0336cret plan is out.",
    # look-alike letters: Cyrillic, Greek, full-width, mathematical, case
    "The ѕесrеt рlаn is out.",
    "The SЕСRЕТ РLАN is out.",
    "The sεcrεt ρlαn is out.",
    "The ｓｅｃｒｅｔ ｐｌａｎ is out.",
    "The 𝐬𝐞𝐜𝐫𝐞𝐭 𝐩𝐥𝐚𝐧 is out.",
    "The SeCrEt PlAn is out.",
    "The sécret plän is out.",
    # hyphens, underscores, dots, slashes, line breaks between the words
    "The secret-plan is out.",
    "The secret_plan is out.",
    "The secret.plan is out.",
    "The secret/plan is out.",
    "The secret\nplan is out.",
    "The secret \u2014 plan is out.",
    "The secret, plan is out.",
    "The secret... plan is out.",
]


@pytest.mark.parametrize("text", DISGUISED)
def test_a_disguised_phrase_is_cut_from_what_the_voice_gets(text: str) -> None:
    said = said_everywhere(text)
    assert "[no]." in said
    assert "plan" not in skeleton(said) and "secret" not in skeleton(said)
    # Also with the options that keep markup, URLs and symbols as written: a
    # voice skips the marks left in a word.
    plain = said_everywhere(text, markdown=False, urls=False, symbols=False)
    for reading in ("", " "):  # a joiner read as nothing, or as a break
        assert "secret plan" not in skeleton(plain).replace("\x1f", reading)


def test_a_phrase_in_a_script_without_spaces_is_found_inside_running_text() -> None:
    guard = PhraseGuard(["秘密计划", "ひみつ"], replacement="[no]。")
    assert (
        said_everywhere("好的。这是秘密计划，对吧。再见。", guard=guard) == "好的。这是[no]。再见。"
    )
    assert said_everywhere("これはひみつです。はい。", guard=guard) == "これは[no]。はい。"
    assert said_everywhere("秘密很好。", guard=guard) == "秘密很好。"


def test_a_phrase_across_pieces_and_forced_cuts_is_cut() -> None:
    text = "First sentence here. And then " + "very " * 3 + "secret\nplan follows. Ok."
    said = said_everywhere(text, max_chars=12)
    assert said == "First sentence here. And then very very very [no]. Ok."


def test_drop_removes_the_sentence_from_the_phrase_on() -> None:
    drop = PhraseGuard(PHRASES, action="drop", replacement="ignored")
    assert said_everywhere("One. Two damn three. Four.", guard=drop) == "One. Two  Four."
    # The words on either side of a dropped sentence meet: what could begin a
    # phrase before it goes with it, so they never form one.
    said = said_everywhere("So the secret damn it. plan ahead. Ok.", guard=drop)
    assert "secret plan" not in skeleton(said)
    assert said == "So the  plan ahead. Ok."


def test_holds_back_only_what_a_phrase_could_be_forming_in() -> None:
    text, passed = SpeechText(phrase_guard=PhraseGuard(["secret plan"])), ""
    for char in "The sea is secretive and the secret":
        passed += "".join(seg.text for seg in text.feed(char))
    # "The sea is secretive and the " passed; only "secret" (maybe "secret plan") waits.
    assert passed == "The sea is secretive and the "
    passed += "".join(seg.text for seg in text.feed(" service now"))
    assert passed == "The sea is secretive and the secret service "  # ("now" may be a URL yet)


def test_a_phrase_at_the_start_never_reaches_the_early_first_piece() -> None:
    chunker = SpeechChunker(phrase_guard=PhraseGuard(["secret plan"], replacement=""))
    said = ""
    for char in "Se\u200bcret **plan**: go now, all of you.":
        said += "".join(piece.text for piece in chunker.feed(char))
        assert "se" not in said.lower(), said
    said += "".join(piece.text for piece in chunker.flush())
    assert "secret" not in skeleton(said) and "plan" not in skeleton(said)


def test_a_phrase_split_by_a_block_end_is_cut_where_the_text_resumes() -> None:
    # A tool call between two text blocks flushes the chunker: "secret" has been
    # said, so "plan" and the rest of its sentence are not.
    chunker = SpeechChunker(phrase_guard=GUARD)
    first = chunker.feed("Let me look up the secret") + chunker.flush()
    second = chunker.feed("plan for you. Done.") + chunker.flush()
    assert "".join(p.text for p in first) == "Let me look up the secret"
    assert "".join(p.text for p in second) == "[no]. Done."
    assert (second[0].start, second[-1].end) == (0, len("plan for you. Done."))


def test_a_hostile_run_of_invisible_characters_holds_a_bounded_amount() -> None:
    # Held past HOLD_MAX, the text goes on; the rest of the phrase is still cut.
    chunker = SpeechChunker(phrase_guard=GUARD)
    said = "".join(p.text for p in chunker.feed("Ok, the secret"))
    for _ in range(2 * HOLD_MAX):
        said += "".join(p.text for p in chunker.feed("\u200b"))
    assert "secret" in said  # let go
    said += "".join(p.text for p in chunker.feed(" plan is out. Bye.") + chunker.flush())
    assert "secret plan" not in skeleton(said) and said.endswith("[no]. Bye.")


@pytest.mark.parametrize("size", [4, 60_000])
def test_a_hostile_reply_full_of_phrases_is_read_in_linear_time(
    monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    # Each cut rescans only what is held, and a reply fed whole is read a slice
    # at a time: the text matched over stays proportional to the reply.
    scanned = 0
    find = PhraseGuard.find

    def counting(self: PhraseGuard, skel: str, after: int) -> tuple[int, int] | None:
        nonlocal scanned
        scanned += len(skel)
        return find(self, skel, after)

    monkeypatch.setattr(PhraseGuard, "find", counting)
    text = "Damn. " * 10_000
    assert speak(text, size) == "[no]. " * 9_999 + "[no]."
    assert scanned < 64 * len(text)


def test_the_pieces_still_tile_the_raw_text() -> None:
    text = "Hi **there**. The secret plan is out. [Read](http://x.io) on. Bye."
    chunker = SpeechChunker(phrase_guard=GUARD)
    pieces = [p for ch in text for p in chunker.feed(ch)] + chunker.flush()
    assert pieces[0].start == 0 and pieces[-1].end == len(text)
    assert all(a.end == b.start for a, b in itertools.pairwise(pieces))
    assert "".join(p.text for p in pieces) == "Hi there. The [no]. Read on. Bye."


def test_phrases_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="at least one phrase"):
        PhraseGuard([" "])
    with pytest.raises(ValueError, match="no letter or digit"):
        PhraseGuard(["🖕"])
    with pytest.raises(ValueError, match="action"):
        PhraseGuard(["x"], action="shout")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="replacement says a banned phrase"):
        PhraseGuard(["say that"], replacement="I'd rather not SAY-THAT.")
    assert PublicPhraseGuard is PhraseGuard


def test_the_skeleton_folds_each_disguise() -> None:
    assert skeleton("ＳＥＣＲＥＴ-Plan.x/y") == "secret plan x y"
    assert skeleton("sec**ret**_plan") == "sec\x1fret\x1fplan"  # maybe nothing, maybe a break
    assert skeleton("ѕесrеt Straße İstanbul ﬁne 𝐬𝐞𝐜") == "secret strasse istanbul fine sec"
    assert skeleton("a\u00adb c\u200bd e\ufeff f") == "a\x1fb c\x1fd e f"
    assert skeleton("café — ok 🎉 x") == "cafe ok x"

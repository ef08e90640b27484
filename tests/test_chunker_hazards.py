"""SpeechChunker on the hazard classes of replies seen in the wild: a table per class.

Each case is (text, language, expected piece texts). Every case is checked fed whole
and fed character by character (the cut must not depend on the split).
"""

from __future__ import annotations

import pytest

from voice_membrane.chunking import MarkdownFilter, SpeechChunker
from voice_membrane.chunking.lexicon import LANGUAGES, lexicon

Case = tuple[str, str | None, list[str]]


def texts(text: str, language: str | None, *, by_char: bool = False) -> list[str]:
    chunker = SpeechChunker(language=language)
    out = []
    for piece in list(text) if by_char else [text]:
        out += chunker.feed(piece)
    return [c.text for c in out + chunker.flush()]


INLINE_LISTS: list[Case] = [
    (
        "To reset it: 1. Hold the power button. 2. Wait for the light.",
        None,
        ["To reset it:", " 1. Hold the power button.", " 2. Wait for the light."],
    ),
    (
        "Okay. Do this: 1. Open the lid. 2. Pour the water. 3. Press start.",
        "en",
        ["Okay.", " Do this: 1. Open the lid.", " 2. Pour the water.", " 3. Press start."],
    ),
    (
        "Okay. Zum Zurücksetzen: 1. Knopf drücken. 2. Warten.",
        "de",
        ["Okay.", " Zum Zurücksetzen: 1. Knopf drücken.", " 2. Warten."],
    ),
    (
        "Okay. Pour cela ; 1. Ouvrez le couvercle. 2. Versez l'eau.",
        "fr",
        ["Okay.", " Pour cela ; 1. Ouvrez le couvercle.", " 2. Versez l'eau."],
    ),
    # Items run into one line, after a comma, or without a period between them.
    (
        "Sure! Here you go: 1. Milk 2. Eggs 3. Bread",
        None,
        ["Sure!", " Here you go: 1. Milk 2. Eggs 3. Bread"],
    ),
    (
        "Sure! Buy these, 1. Milk, 2. Eggs, 3. Bread. Then go.",
        None,
        ["Sure!", " Buy these, 1. Milk, 2. Eggs, 3. Bread.", " Then go."],
    ),
    (
        "Klar. Du brauchst 1. Mehl 2. Eier 3. Milch. Dann backen.",
        "de",
        ["Klar.", " Du brauchst 1. Mehl 2. Eier 3. Milch.", " Dann backen."],
    ),
    # A cut before the numeral is fine; a sentence that ends in a number still ends.
    (
        "Okay. I counted to 10. Then I stopped.",
        None,
        ["Okay.", " I counted to 10.", " Then I stopped."],
    ),
    ("Okay. I am 30. Then I left.", None, ["Okay.", " I am 30.", " Then I left."]),
    # "Nr." is an abbreviation, not the end of a sentence before an item.
    (
        "Gut. Es ist Nr. 5. Das war's.",
        "de",
        ["Gut.", " Es ist Nr. 5.", " Das war's."],
    ),
]

INLINE_CODE: list[Case] = [
    (
        "Type `git commit | -m` to commit. Then push.",
        None,
        ["Type git commit | -m", " to commit.", " Then push."],
    ),
    (
        "Okay. Type `make test; make lint. Now go` and wait. Then look.",
        None,
        ["Okay.", " Type make test; make lint. Now go and wait.", " Then look."],
    ),
    (
        'Okay. Run `echo "hi` now. Then stop.',  # a quote in code opens nothing
        None,
        ["Okay.", ' Run echo "hi now.', " Then stop."],
    ),
    (
        "Run `make test`. Then deploy.",  # a sentence end right after code still ends
        None,
        ["Run make test.", " Then deploy."],
    ),
    (
        "Gib `git log --oneline, bitte` ein. Dann weiter.",
        "de",
        ["Gib git log --oneline, bitte", " ein.", " Dann weiter."],  # a cut after code is fine
    ),
]

QUOTES: list[Case] = [
    ("“Is it raining?” he wondered.", None, ["“Is it raining?” he wondered."]),
    (
        "Okay. “Is it raining?” he wondered. Then he left.",
        None,
        ["Okay.", " “Is it raining?” he wondered.", " Then he left."],
    ),
    (
        "Okay. 'Why not?' she asked. Then she left.",
        None,
        ["Okay.", " 'Why not?' she asked.", " Then she left."],
    ),
    (
        'Okay. "Stop!" the guard shouted. Then all froze.',
        None,
        ["Okay.", ' "Stop!" the guard shouted.', " Then all froze."],
    ),
    (
        "Okay. “Go home.” she said. Then she left.",
        None,
        ["Okay.", " “Go home.” she said.", " Then she left."],
    ),
    (
        "Okay. „Regnet es?“ fragte er. Dann ging er.",
        "de",
        ["Okay.", " „Regnet es?“ fragte er.", " Dann ging er."],
    ),
    (
        "Okay. »Nein!« rief sie. Dann ging sie.",
        "de",
        ["Okay.", " »Nein!« rief sie.", " Dann ging sie."],
    ),
    (
        "Okay. «Il pleut?» demanda-t-il. Puis il partit.",
        "fr",
        ["Okay.", " «Il pleut?» demanda-t-il.", " Puis il partit."],
    ),
    # French spacing inside guillemets closes the same way.
    (
        "D'accord. « Il pleut ? » demanda-t-il. Puis il partit.",
        "fr",
        ["D'accord.", " « Il pleut ? » demanda-t-il.", " Puis il partit."],
    ),
    (
        "D'accord. « Il pleut. » Puis il partit.",
        "fr",
        ["D'accord.", " « Il pleut. »", " Puis il partit."],
    ),
    (
        "Vale. «¿Llueve?» preguntó él. Luego salió.",
        "es",
        ["Vale.", " «¿Llueve?» preguntó él.", " Luego salió."],
    ),
    # A quote that ends its sentence still ends it.
    ('Okay. "Stop!" He left.', None, ["Okay.", ' "Stop!"', " He left."]),
    (
        "Okay. „Es regnet.“ Dann ging er.",
        "de",
        ["Okay.", " „Es regnet.“", " Dann ging er."],
    ),
]

NUMERALS: list[Case] = [
    (
        "Okay. Take the 3. exit. Then turn left.",
        None,
        ["Okay.", " Take the 3. exit.", " Then turn left."],
    ),
    (
        "Okay. Nimm die 2. Ausfahrt und dann die 1. links.",
        "de",
        ["Okay.", " Nimm die 2. Ausfahrt und dann die 1. links."],
    ),
    (
        "Okay. Es kommt am 3. oder 4. Tag. Dann geht es.",
        "de",
        ["Okay.", " Es kommt am 3. oder 4. Tag.", " Dann geht es."],
    ),
    # A first piece never ends on an ordinal: its noun follows.
    ("Take the 3rd exit on the left.", "en", ["Take the 3rd exit", " on the left."]),
    ("Prenez la 2e sortie à droite.", "fr", ["Prenez la 2e sortie", " à droite."]),
    ("Tome la 2.ª salida a la derecha.", "es", ["Tome la 2.ª salida", " a la derecha."]),
    ("Neem de 3de afslag rechts.", None, ["Neem de 3de afslag", " rechts."]),
    (
        "Okay. It has 3. exits are many.",  # lowercase goes on, whatever the numeral
        None,
        ["Okay.", " It has 3. exits are many."],
    ),
]

LANGUAGE_CASES: list[Case] = [
    (
        "Okay. Die Ausstellung läuft bis zum 12. März. Danach ist sie in Wien.",
        None,
        ["Okay.", " Die Ausstellung läuft bis zum 12. März.", " Danach ist sie in Wien."],
    ),
    (
        "Okay. Wir brauchen u. a. Mehl, d. h. viel, usw. und Nr. 4 dazu. Dann backen.",
        None,
        ["Okay.", " Wir brauchen u. a. Mehl, d. h. viel, usw. und Nr. 4 dazu.", " Dann backen."],
    ),
    (
        "Okay. Es gibt z. B. Brot, bzw. Kuchen. Dann Kaffee.",
        "de",
        ["Okay.", " Es gibt z. B. Brot, bzw. Kuchen.", " Dann Kaffee."],
    ),
    (
        "Okay. Am 3. Oktober ist frei. Dann nicht.",
        None,
        ["Okay.", " Am 3. Oktober ist frei.", " Dann nicht."],
    ),
    # A month after "N." continues the date in any language, capitalised or not.
    (
        "Okay. It ends on the 3. March this year. Then it moves.",
        None,
        ["Okay.", " It ends on the 3. March this year.", " Then it moves."],
    ),
    (
        "Okay. Le 1. Janvier est férié. Puis on travaille.",
        "fr",
        ["Okay.", " Le 1. Janvier est férié.", " Puis on travaille."],
    ),
    (
        "Okay. Op 5. Mei is het feest. Dan slapen.",
        "nl",
        ["Okay.", " Op 5. Mei is het feest.", " Dan slapen."],
    ),
    (
        "Okay. See e. g. the docs, i. e. the manual. Then go.",
        "en",
        ["Okay.", " See e. g. the docs, i. e. the manual.", " Then go."],
    ),
    (
        "Okay. Il Dott. Rossi riceve, ecc. e poi basta. Poi si chiude.",
        "it",
        ["Okay.", " Il Dott. Rossi riceve, ecc. e poi basta.", " Poi si chiude."],
    ),
    (
        "Okay. La Sra. Gómez llega aprox. a las nueve. Luego comemos.",
        "es",
        ["Okay.", " La Sra. Gómez llega aprox. a las nueve.", " Luego comemos."],
    ),
    (
        "Okay. Le rendez-vous avec M. Dupont, p. ex. à 10 h. Puis le déjeuner.",
        "fr",
        ["Okay.", " Le rendez-vous avec M. Dupont, p. ex. à 10 h.", " Puis le déjeuner."],
    ),
    (
        "Okay. Met dhr. Jansen, bijv. met de auto, d.w.z. snel. Dan thuis.",
        "nl",
        ["Okay.", " Met dhr. Jansen, bijv. met de auto, d.w.z. snel.", " Dan thuis."],
    ),
    (
        "Okay. O Sr. Silva chega, i. e. na segunda. Depois almoçamos.",
        "pt",
        ["Okay.", " O Sr. Silva chega, i. e. na segunda.", " Depois almoçamos."],
    ),
    (
        "Okay. Los EE. UU. tienen Dra. Pérez. Luego nada.",
        "es",
        ["Okay.", " Los EE. UU. tienen Dra. Pérez.", " Luego nada."],
    ),
    # With its language, a German ordinal before a noun holds ("am 3. Tag"), and a
    # German opener ends the sentence after "usw.".
    (
        "Okay. Ich kam am 3. Tag. Dann ging ich.",
        "de",
        ["Okay.", " Ich kam am 3. Tag.", " Dann ging ich."],
    ),
    (
        "Okay. Mehl, Zucker usw. Dann backen.",
        "de",
        ["Okay.", " Mehl, Zucker usw.", " Dann backen."],
    ),
    (
        "Okay. Mehl, Zucker usw. Dann backen.",
        None,  # "Dann" is not an English opener: the default keeps the sentence whole
        ["Okay.", " Mehl, Zucker usw. Dann backen."],
    ),
]

TABLES = {
    "inline_lists": INLINE_LISTS,
    "inline_code": INLINE_CODE,
    "quotes": QUOTES,
    "numerals": NUMERALS,
    "languages": LANGUAGE_CASES,
}
ALL = [
    pytest.param(text, language, expected, id=f"{name}-{n}")
    for name, table in TABLES.items()
    for n, (text, language, expected) in enumerate(table)
]


@pytest.mark.parametrize(("text", "language", "expected"), ALL)
def test_hazard_pieces(text: str, language: str | None, expected: list[str]) -> None:
    assert texts(text, language) == expected


@pytest.mark.parametrize(("text", "language", "expected"), ALL)
def test_hazard_pieces_fed_char_by_char(
    text: str, language: str | None, expected: list[str]
) -> None:
    assert texts(text, language, by_char=True) == expected


@pytest.mark.parametrize("language", [None, *LANGUAGES])
def test_every_language_keeps_the_brief_examples_whole(language: str | None) -> None:
    # Rules, not tables: lists, code, quotes, numerals before a lowercase word or a
    # month, one-letter sequences and lowercase after an abbreviation hold in every
    # language. (A language's own abbreviations, "Nr.", are its table's: see above.)
    for text, hazard in [
        ("To reset it: 1. Hold the power button. 2. Wait for the light.", "1. Hold"),
        ("Okay. Type `git commit | -m` now.", "git commit | -m"),
        ("Okay. “Is it raining?” he wondered.", "raining?” he"),
        ("Okay. Take the 3. exit now.", "3. exit"),
        ("Okay. Es läuft bis zum 12. März, d. h. lange.", "12. März"),
        ("Okay. Es läuft bis zum 12. März, d. h. lange.", "d. h. lange"),
        ("Okay. Mehl, Eier usw. und Nr. 4 dazu.", "usw. und"),
        ("Okay. See e. g. this, i. e. that.", "e. g. this"),
    ]:
        pieces = texts(text, language)
        # Cut offsets in the spoken text (the backticks are not spoken).
        cuts = [sum(len(p) for p in pieces[: n + 1]) for n in range(len(pieces) - 1)]
        start = "".join(pieces).index(hazard)
        inside = [c for c in cuts if start < c < start + len(hazard)]
        assert not inside, (language, text, pieces)


def test_inline_code_is_marked_by_the_filter() -> None:
    md = MarkdownFilter()
    segments = md.feed("Type `a | b` now") + md.flush()
    assert [(s.text, s.code) for s in segments] == [
        ("Type ", False),
        ("a | b", True),
        (" now", False),
    ]


def test_inline_code_forced_cut_prefers_a_space_outside_the_code() -> None:
    code = " ".join(["x"] * 20)  # 39 characters of code with spaces inside
    text = f"Okay. Then alpha beta gamma `{code}` delta."
    pieces = [c.text for c in SpeechChunker(max_chars=60).feed(text)]
    assert pieces[1] == " Then alpha beta gamma"
    assert " x" not in pieces[1]


def test_unknown_language_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown language 'xx' \(known: en, de, fr"):
        SpeechChunker(language="xx")


def test_default_tables_hold_every_language_but_only_english_openers() -> None:
    default = lexicon(None)
    for language in LANGUAGES:
        tables = lexicon(language)
        # Whatever a language never ends on, the default never ends on either,
        # unless English may end a sentence there ("No.").
        assert tables.never_end - lexicon("en").maybe_end <= default.never_end
        assert tables.maybe_end <= default.maybe_end | default.never_end
    assert "dann" not in default.openers and "dann" in lexicon("de").openers
    assert "am" not in default.ordinal_context and "zum" in default.ordinal_context

"""The shape of a spoken answer, judged from its text alone (sans-I/O): its language
(a stopword profile), its sentences (the speech chunker's own sentence rules),
whether it ends on a finished sentence, and the 4-grams it repeats.

The language check counts each language's commonest function words in the reply:
short, well-formed answers hold several ("the", "is", "of" / "le", "est", "de").
It names the language with the most hits, or None with no hit or a tie at the top
(``Awesome.`` or ``Paris.`` say nothing about their language). It knows the
chunker's languages (``chunking.lexicon.LANGUAGES``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from voice_membrane.chunking.cut_off import ends_sentence
from voice_membrane.providers.llama_sampling import ends_a_sentence, sentence_chunker

# Each language's commonest function words. A word common to several ("de", "la",
# "a") is in each of their lists: it counts for all of them.
STOPWORDS: dict[str, frozenset[str]] = {
    code: frozenset(words.split())
    for code, words in {
        "en": "the is are was and of to in it you that this for with be have i your "
        "what can not on at or as by about there they its my we an would will a",
        "fr": "le la les est et de des du une un pour dans vous que qui pas sur au "
        "avec ce il je sont être fait aux votre mais ou nous en",
        "es": "el la los las es y de del un una para por con que se su lo como más "
        "pero está son al hay muy usted tu en",
        "de": "der die das ist und nicht ein eine zu den mit sich auf für es ich "
        "sie du wir auch im dem wie oder sind",
        "it": "il la di che è e per non una della sono gli con del le si ma come "
        "anche questo alla nel più un",
        "nl": "het een is van en niet op te dat zijn met voor je ik wat er ook aan "
        "maar bij om naar de",
        "pt": "o os as é e do da de não um uma para com que se em por na no mais "
        "você são está muito a",
    }.items()
}
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)?")
_TOKEN = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """The reply's words, lowercased (letters only; an apostrophe inside a word kept)."""
    return [w.lower().replace("\u2019", "'") for w in _WORD.findall(text)]


def language(text: str) -> str | None:
    """The language whose stopwords the text holds most, or None when none or a tie
    leads."""
    seen = words(text)
    hits = sorted(
        ((sum(w in table for w in seen), code) for code, table in STOPWORDS.items()),
        reverse=True,
    )
    (best, code), (second, _) = hits[0], hits[1]
    return code if best > second else None


def sentences(text: str) -> list[str]:
    """The sentences (and lines) as the speech chunker's sentence-end rules cut them
    (``Dr.``, ``3.14`` and ``e.g.`` end nothing); the sentence limit counts the same."""
    chunker = sentence_chunker()
    found, held = [], ""
    for piece in [*chunker.feed(text), *chunker.flush()]:
        held += piece.text
        if ends_a_sentence(piece) and held.strip():
            found.append(held.strip())
            held = ""
    return [*found, held.strip()] if held.strip() else found


def repeated_4grams(text: str) -> int:
    """How many 4-grams of words and numbers occur again after their first time (a
    loop scores high: "2023, 2023, 2023, …")."""
    seen = _TOKEN.findall(text.lower())
    grams = Counter(tuple(seen[i : i + 4]) for i in range(len(seen) - 3))
    return sum(n - 1 for n in grams.values())


@dataclass(frozen=True, slots=True)
class Shape:
    """What the measures say about one reply."""

    language: str | None
    sentences: int
    finished: bool  # ends on a sentence end (a terminal mark, closers)
    repeats: int  # repeated 4-grams
    words: int

    @property
    def one_or_two(self) -> bool:
        return 1 <= self.sentences <= 2


def shape(text: str) -> Shape:
    """Measure one reply."""
    spoken = sentences(text)
    return Shape(
        language=language(text),
        sentences=len(spoken),
        finished=bool(spoken) and ends_sentence(spoken[-1]),
        repeats=repeated_4grams(text),
        words=len(words(text)),
    )

"""Word lists the speech chunker consults, per language. All entries are lowercase.

Abbreviations are stored with their final period, the way they appear before the
period the chunker is judging (``"e.g."``, ``"u.s."``). Lookups lowercase the word
and turn a typographic apostrophe into ``'``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


FUNCTION_WORDS: frozenset[str] = _words(
    # Words a phrase almost never ends on: cutting the first piece after one of these
    # leaves a dangling "The capital of the" in the listener's ear.
    """
    a an the this that these those some any no every each all both either neither
    such another other own same few many much more most less
    and or but nor so yet if than as because while although though unless until
    since whether whereas once
    of to in on at for with from by into onto about over under after before
    between through during without within against among across around behind
    beyond toward towards upon per via like near off
    is are was were be been being am will would can could should shall may might
    must has have had do does did get gets got
    my your his her its our their whose
    i we he she they you it one
    i'm i've i'll i'd we're we've we'll we'd you're you've you'll you'd
    he's she's they're they've they'll it's that's there's here's what's who's
    let's let don't doesn't didn't can't won't isn't aren't wasn't weren't
    not very just really quite rather only even also too then
    which who whom what when where why how there here
    """
)

TITLES: frozenset[str] = _words(
    # Titles written without their period ("Mr Smith"): the name always follows.
    "mr mrs ms mx dr prof st sr jr mt rev gen col lt sgt capt gov sen rep hon pres vs"
)

NEVER_END: frozenset[str] = _words(
    # A period after these never ends a sentence: a name, an example or a number follows.
    """
    mr. mrs. ms. mx. dr. prof. st. sr. jr. mt. rev. gen. col. lt. sgt. capt. gov.
    sen. rep. hon. pres. vs. v. e.g. i.e. cf. viz. approx. fig. figs. eq. eqs. p.s. n.b.
    """
)

MAYBE_END: frozenset[str] = _words(
    # A period after these ends a sentence only when a new sentence visibly starts
    # (the next non-space character is uppercase) or the text ends: "at 10 a.m. today"
    # continues, "at 10 a.m. Then" does not. Number-prefixes ("No. 5", "p. 12") live
    # here too, so a one-word answer "No. I won't." still ends.
    """
    etc. a.m. p.m. u.s. u.s.a. u.k. e.u. u.n. a.d. b.c. inc. ltd. co. corp. llc.
    plc. al. ph.d. m.d. b.a. m.a. b.sc. m.sc. no. nos. vol. vols. p. pp. ch. sec.
    ca. c. est. ave. blvd. rd. dept. min. max. hr. hrs. sq. oz. lb. lbs. esp. misc.
    a.i. d.c. l.a. n.y. n.y.c. q.e.d. r.i.p.
    jan. feb. mar. apr. jun. jul. aug. sep. sept. oct. nov. dec.
    mon. tue. tues. wed. thu. thur. thurs. fri. sat. sun.
    """
)

SENTENCE_OPENERS: frozenset[str] = FUNCTION_WORDS | _words(
    # Where a period is ambiguous ("in the U.S. It was", "the U.S. Postal Service"), a
    # capitalised word from this list starts a new sentence; any other capitalised word
    # is taken for a name that continues it. A missed end only makes a piece longer.
    """
    yes no yeah sure okay ok well oh hmm now still yet however meanwhile otherwise
    instead finally first second third next last then today tomorrow yesterday
    tonight maybe perhaps please thanks overall unfortunately fortunately hopefully
    luckily honestly actually anyway besides plus note remember try see let's
    """
)

INTERJECTIONS: frozenset[str] = _words(
    # One-word openers that stand alone before a comma ("Sure, here it is"): the
    # comma after them may release the first piece even below min_clause_words.
    """
    yes yeah yep no nope sure okay ok alright well right absolutely certainly
    definitely sorry hmm hm oh ah um uh so great perfect thanks hi hello hey
    wait first actually honestly basically indeed good
    """
)


# -- other languages ---------------------------------------------------------------
# The tables above are English. ``Lexicon`` bundles what the sentence-end rules look
# up; ``lexicon(code)`` gives one language's (English-based: English words, names and
# abbreviations turn up in any reply) or, with no code, the default for mixed or
# unknown languages.

LANGUAGES: tuple[str, ...] = ("en", "de", "fr", "es", "it", "nl", "pt")

MONTHS: frozenset[str] = _words(
    # After "3." a capitalised month continues the date ("am 3. Oktober"), in any
    # language. Abbreviations that are also common English words (mar, may is a
    # month anyway, set, ago, gen) are left out.
    """
    january february march april may june july august september october november december
    januar jänner februar märz mai juni juli oktober dezember
    janvier février mars avril juin juillet août septembre octobre novembre décembre
    enero febrero marzo abril mayo junio julio agosto septiembre setiembre octubre
    noviembre diciembre
    gennaio febbraio aprile maggio giugno luglio settembre ottobre dicembre
    januari februari maart mei augustus
    janeiro fevereiro março maio junho julho setembro outubro novembro dezembro
    marts maj augusti desember
    jan feb apr jun jul aug sep sept oct okt nov dec dez janv févr avr juil déc
    ene abr dic ott mrt
    """
)


def _abbrevs(text: str) -> frozenset[str]:
    """Abbreviations, lowercased; a one-letter sequence is written joined ("d.h.")."""
    return frozenset(word.lower() for word in text.split())


# Per language: (never end, may end, ordinal context, sentence openers). A one-letter
# sequence such as "d. h." is stored joined ("d.h."). "Ordinal context": words after
# which "N." is an ordinal in languages that write ordinals with a period ("zum 3.").
_TABLES: dict[str, tuple[str, str, str, str]] = {
    "en": ("", "", "", ""),
    "de": (
        """
        z.B. d.h. u.a. o.ä. u.ä. s.o. s.u. u.U. i.d.R. z.T. z.Z. v.a. bzw. vgl. ggf. evtl.
        inkl. exkl. zzgl. abzgl. sog. nr. hr. hrn. fr. dipl. ing. st. str. tel. ca.
        bspw. insb. allg. eigtl. lt. max. min. mind. geb. gest. verh.
        """,
        "usw. etc. u.v.m. o.ä. mio. mrd. jh. jhd. bd. abs. kap. s. std. min. sek. tsd.",
        """
        am im zum zur vom beim bis ab seit an ans und oder den dem des der die das ein eine einen
        einem eines einer jeden jedem jeder jedes ihr ihrem ihren ihres sein seinem seinen
        seines unser unserem meinem meinen deinem diesem diesen dieser dieses vor nach
        """,
        """
        der die das ein eine es er sie wir ich ihr sie dann danach aber und oder doch
        also außerdem jetzt heute morgen gestern ja nein bitte danke gut leider zum
        """,
    ),
    "fr": (
        """
        m. mm. mme. mmes. mlle. mlles. dr. mgr. pr. p.ex. c.-à-d. cf. av. bd. st. ste.
        env. n°. no.
        """,
        "etc. éd. chap. vol. p. pp. fig. janv. févr. avr. juil. sept. oct. nov. déc.",
        "",
        """
        le la les un une il elle ils elles nous vous je on ce cette ces puis ensuite mais
        et alors oui non merci bien aujourd'hui demain hier enfin donc cependant
        """,
    ),
    "es": (
        """
        sr. sra. srta. sres. dr. dra. ud. uds. vd. vds. d. dña. lic. ing. prof. p.ej.
        aprox. núm. n.º pág. págs. tel. avda. c/. ee. cía. sto. sta.
        """,
        "etc. uu. ee.uu. a.c. d.c. s.a. izq. dcha. vol. cap. fig.",
        "",
        """
        el la los las un una unos unas yo tú él ella nosotros ellos ellas usted ustedes
        luego después pero y o sí no gracias bueno hoy mañana ayer entonces además
        """,
    ),
    "it": (
        """
        sig. sigg. dott. prof. ing. avv. geom. egr. p.es. cfr. ca. pag. pagg. tel. n. nn. s.
        """,
        "ecc. ecc.. vol. cap. fig. s.p.a. s.r.l. gen. febbr. sett. ott. nov. dic.",
        "",
        """
        il lo la i gli le un uno una io tu lui lei noi voi loro poi dopo ma e o sì no
        grazie bene oggi domani ieri allora inoltre quindi
        """,
    ),
    "nl": (
        """
        dhr. mevr. mw. mr. dr. drs. ir. ing. prof. bijv. bv. d.w.z. o.a. m.b.t. i.p.v.
        t.a.v. m.a.w. i.v.m. z.g.a.n. zgn. ca. nr. blz. vnl. resp. evt. incl. excl. jl. a.s.
        """,
        "enz. e.d. e.a. etc. n.v. b.v. vol. fig.",
        "",
        """
        de het een ik jij je hij zij ze wij we u dan daarna maar en of ja nee dank bedankt
        goed vandaag morgen gisteren dus ook verder
        """,
    ),
    "pt": (
        """
        sr. sra. srta. srs. dr. dra. prof. profa. eng. exmo. exma. v.exa. p.ex. cf. pág.
        págs. n.º nº. tel. av. aprox. séc. dª. d.
        """,
        "etc. a.c. d.c. s.a. lda. ltda. vol. cap. fig.",
        "",
        """
        o a os as um uma uns umas eu tu ele ela nós eles elas você vocês depois então mas
        e ou sim não obrigado obrigada bem hoje amanhã ontem além
        """,
    ),
}

# The default leaves out ordinal-context words that are common English words ("I am
# 30. Then …" must still end): only German writes ordinals with a period here.
_DEFAULT_ORDINAL_UNSAFE = frozenset({"am", "an", "die", "den", "ihr", "sein", "vor", "bis", "ab"})

# Ordinals written with a suffix ("3rd", "1er", "2º", "4de"): like a number, one
# cannot end a first piece ("the 3rd | exit"). German writes "3." (ordinal context).
_ORDINAL_SUFFIXES: dict[str, str] = {
    "en": "st nd rd th",
    "de": "",
    "fr": "er re e ème eme nd nde",
    "es": "º ª .º .ª ° o a er",
    "it": "º ª ° o a",
    "nl": "e ste de",
    "pt": "º ª .º .ª ° o a",
}
_LEADING_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class Lexicon:
    """The words the sentence-end rules look up, for one language or the default."""

    never_end: frozenset[str]
    maybe_end: frozenset[str]
    ordinal_context: frozenset[str]
    openers: frozenset[str]
    ordinal_suffixes: frozenset[str]

    def is_ordinal(self, word: str) -> bool:
        """Is ``word`` (lowercase) a number with an ordinal suffix ("3rd", "2º")?"""
        digits = _LEADING_DIGITS.match(word)
        return digits is not None and word[digits.end() :] in self.ordinal_suffixes


def _table(code: str) -> Lexicon:
    never, maybe, ordinal, openers = _TABLES[code]
    maybe_set = MAYBE_END | _abbrevs(maybe)
    return Lexicon(
        never_end=(NEVER_END | _abbrevs(never)) - MAYBE_END,
        maybe_end=maybe_set,
        ordinal_context=_words(ordinal),
        openers=SENTENCE_OPENERS | _words(openers),
        ordinal_suffixes=_words(_ORDINAL_SUFFIXES["en"] + " " + _ORDINAL_SUFFIXES[code]),
    )


_BY_CODE: dict[str, Lexicon] = {code: _table(code) for code in LANGUAGES}


def _default() -> Lexicon:
    tables = _BY_CODE.values()
    # Never-end wins over may-end (a missed end only makes a piece longer), except for
    # English words that may end a sentence ("No.", "etc.").
    never = frozenset().union(*(t.never_end for t in tables)) - MAYBE_END
    return Lexicon(
        never_end=never,
        maybe_end=frozenset().union(*(t.maybe_end for t in tables)) - never,
        ordinal_context=_BY_CODE["de"].ordinal_context - _DEFAULT_ORDINAL_UNSAFE,
        # Only English openers: a capitalised "Die" or "La" may be a name, and an
        # opener is what lets an ambiguous period end a sentence.
        openers=SENTENCE_OPENERS,
        ordinal_suffixes=frozenset().union(*(t.ordinal_suffixes for t in tables)),
    )


DEFAULT_LEXICON: Lexicon = _default()


def lexicon(language: str | None) -> Lexicon:
    """The tables for ``language`` (one of ``LANGUAGES``), or the default for None."""
    if language is None:
        return DEFAULT_LEXICON
    try:
        return _BY_CODE[language]
    except KeyError:
        raise ValueError(f"unknown language {language!r} (known: {', '.join(LANGUAGES)})") from None

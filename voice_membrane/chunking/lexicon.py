"""Word lists the speech chunker consults. Constants only; all entries are lowercase.

Abbreviations are stored with their final period, the way they appear before the
period the chunker is judging (``"e.g."``, ``"u.s."``). Lookups lowercase the word
and turn a typographic apostrophe into ``'``.
"""

from __future__ import annotations


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

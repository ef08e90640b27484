"""What the endpointer decides; positions are samples of the input audio."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EndReason = Literal["silence", "model", "final_timeout", "max_delay"]


@dataclass(frozen=True, slots=True)
class FinalizeStt:
    """The detector says the speech stopped: ask the STT stream to settle."""

    at_sample: int


@dataclass(frozen=True, slots=True)
class JudgeTurn:
    """The detector says the speech stopped and an end-of-turn model is set:
    judge whether the user is done from the utterance's audio (from ``start``,
    at most its last 8 s) up to ``at_sample``, and answer with
    ``Endpointer.turn_judged`` for ``speech_end``."""

    at_sample: int
    start: int
    speech_end: int


@dataclass(frozen=True, slots=True)
class EndOfTurn:
    """The user is done: start the turn with ``text``. ``reason``: a final
    transcript came after enough silence (``silence``), or after the shorter
    pause the end-of-turn model allows when it judged the user done
    (``model``); the wait for a final expired and the finals so far are used
    (``final_timeout``), or the hard cap (``max_delay``). ``speech_end`` is
    where the user's speech stopped."""

    text: str
    reason: EndReason
    at_sample: int
    speech_end: int
    tentative: bool = False  # its text is the pending ``TentativeEnd``'s: the held reply stands


@dataclass(frozen=True, slots=True)
class TentativeEnd:
    """The user's speech stopped and a final transcript with words came, but the
    end silence still runs: a reply may start now, held unheard until an
    ``EndOfTurn`` with ``tentative`` set (or thrown away on ``TentativeCancelled``
    or an ``EndOfTurn`` with other text). At most one per stretch of speech."""

    text: str
    at_sample: int
    speech_end: int


@dataclass(frozen=True, slots=True)
class TentativeCancelled:
    """The user went on (speech resumed into the same utterance), or the
    utterance made no turn: throw the held reply away."""

    at_sample: int


@dataclass(frozen=True, slots=True)
class LateTranscript:
    """A final transcript of an utterance already closed: kept, never lost (the
    listener makes it a turn of its own). ``after_turn``: that utterance had
    already made a turn without these words; otherwise it had made none (its
    finals had not come)."""

    text: str
    at_sample: int
    after_turn: bool


@dataclass(frozen=True, slots=True)
class PausePlayout:
    """The user seems to be speaking over the assistant: pause its audio
    (keep it; ``ResumePlayout`` or ``Interrupt`` follows)."""

    at_sample: int


@dataclass(frozen=True, slots=True)
class ResumePlayout:
    """The pause was a false interruption (noise, a cough, a backchannel)."""

    at_sample: int


@dataclass(frozen=True, slots=True)
class Interrupt:
    """The user said something real over the assistant: stop the reply (the
    same path as Ctrl-C). ``text`` is what interrupted it."""

    text: str
    at_sample: int


@dataclass(frozen=True, slots=True)
class NoWords:
    """The user's speech, at least ``NO_WORDS_MIN_S`` of it, settled with no
    words: music, noise, or speech the recognizer cannot hear (another
    language). No turn; the user is told once. ``start``/``speech_end``: where
    it began and stopped."""

    at_sample: int
    start: int
    speech_end: int


NO_WORDS_MIN_S = 1.0  # shorter: a cough or a breath, nothing to tell anyone


Decision = (
    FinalizeStt
    | JudgeTurn
    | EndOfTurn
    | NoWords
    | TentativeEnd
    | TentativeCancelled
    | LateTranscript
    | PausePlayout
    | ResumePlayout
    | Interrupt
)

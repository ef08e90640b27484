"""What a ``Listener`` gives out: transcripts as they come, the detector's
speech starts and ends, user turns (tentative or decided), barge-in, and the
faults it went on after."""

from __future__ import annotations

from dataclasses import dataclass

from ..listening.decisions import Interrupt, PausePlayout, ResumePlayout
from ..vocab.transcripts import Transcript


@dataclass(frozen=True, slots=True)
class Heard:
    """A transcript as it comes: a partial (shown dimmed) or a final.
    ``stream_from_s``: where its stream's audio begins in the input (its
    times are from there)."""

    transcript: Transcript
    stream_from_s: float = 0.0


@dataclass(frozen=True, slots=True)
class UserTurn:
    """The user is done: ``text`` starts a turn. Wall-clock stamps
    (``time.perf_counter_ns``): ``speech_end_ns`` when their speech stopped,
    ``final_ns`` when the last final transcript came, ``decided_ns`` when the
    endpointer ended the turn. ``reason``: see ``EndOfTurn`` (or ``late``: a
    final that came after its utterance had closed empty; ``tentative``: a
    ``TentativeTurn``'s). ``tentative``: the words are the pending
    ``TentativeTurn``'s (a reply held for it stands). ``turn_model_ms``: the
    end-of-turn model's own time for its last judgement of this utterance
    (None: no model, or it was not asked)."""

    text: str
    reason: str
    speech_start_ns: int | None
    speech_end_ns: int
    final_ns: int | None
    decided_ns: int
    tentative: bool = False
    turn_model_ms: float | None = None


@dataclass(frozen=True, slots=True)
class TentativeTurn:
    """The user has probably finished (``TentativeEnd``): ``turn`` may be answered
    now if its audio is held until the ``UserTurn`` with ``tentative`` set."""

    turn: UserTurn


@dataclass(frozen=True, slots=True)
class TentativeDropped:
    """The pending ``TentativeTurn`` is not the user's turn: throw its reply away."""


@dataclass(frozen=True, slots=True)
class BargeIn:
    """Speech over the assistant: pause its playout, resume it, or interrupt
    the reply (``Interrupt.text``: what interrupted it)."""

    decision: PausePlayout | ResumePlayout | Interrupt


@dataclass(frozen=True, slots=True)
class SpeechBegan:
    """The detector heard speech start ``at_s`` seconds into the input."""

    at_s: float


@dataclass(frozen=True, slots=True)
class SpeechEnded:
    """The detector heard speech stop ``at_s`` seconds into the input."""

    at_s: float


@dataclass(frozen=True, slots=True)
class ListenError:
    """Listening hit a fault (an STT error): the utterance is dropped, one line."""

    message: str


@dataclass(frozen=True, slots=True)
class UtteranceCapped:
    """One stretch of speech reached ``[endpoint] max_utterance_s`` at ``at_s``
    seconds into the input: its STT stream was asked to settle, what it heard
    is the turn, and the speech that goes on is not transcribed (until a pause)."""

    at_s: float
    max_s: float


@dataclass(frozen=True, slots=True)
class NoWordsHeard:
    """``speech_s`` seconds of what the detector took for speech, ending
    ``at_s`` seconds into the input, settled with no words: music, noise, or
    a language the recognizer cannot hear. No turn; listening goes on."""

    at_s: float
    speech_s: float


ListenItem = (
    Heard
    | SpeechBegan
    | SpeechEnded
    | UtteranceCapped
    | NoWordsHeard
    | UserTurn
    | TentativeTurn
    | TentativeDropped
    | BargeIn
    | ListenError
)

"""One utterance as the endpointer follows it, and what is remembered of the
closed ones: from a speech start until its turn is decided (speech that
resumes before then is the same utterance), then how it ended, so that a
final decoded late is told apart by the speech start it came from."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from ..vocab.spacing import join_words
from ..vocab.transcripts import Transcript

Closed = Literal["turn", "empty", "dropped"]  # words, none, echo or a backchannel
_ENDED_KEPT = 16  # closed utterances whose late finals are told apart


@dataclass(slots=True)
class Utterance:
    start: int
    during_assistant: bool
    accepted: bool
    accepted_at: int
    run_start: int  # where the current stretch of speech began
    voiced_end: int  # the end of its last window heard as speech
    loud: int = 0
    loud_from: int | None = None  # the first window judged the user's, over playout
    stream_from: int = 0  # where the current STT stream's audio begins (its pre-roll)
    speaking: bool = True
    end_at: int | None = None
    finalize_at: int | None = None
    final_at: int | None = None  # a final came at this sample, after the finalize
    finals: list[str] = field(default_factory=list)
    partial: str = ""
    real: bool = False
    interrupted: bool = False
    paused: bool = False  # its speech paused the playout once (a resume is final)
    tentative: str | None = None  # the text of the pending TentativeEnd
    tentative_sent: bool = False  # one per stretch of speech
    first_start: int = 0  # the number of its first speech start
    # the end-of-turn model's judgement of the current pause (None: none yet)
    done_probability: float | None = None
    judged_at: int | None = None  # the sample its answer came at

    def users_words(self, t: Transcript, sample_rate: int, echo_cancelled: bool) -> str:
        """``t`` without the words said before the user's voice was first told
        from the echo (the STT heard both), when it gives word times."""
        if echo_cancelled or not (self.during_assistant and self.loud_from is not None and t.words):
            return t.text.strip()
        loud_from = self.loud_from
        keep = [
            w.text for w in t.words if self.stream_from + round(w.end_s * sample_rate) > loud_from
        ]
        return join_words(keep).strip()


class ClosedUtterances:
    """How the last few utterances ended, by the number of their first speech start."""

    def __init__(self) -> None:
        self.last: Closed | None = None
        self._ended: deque[tuple[int, Closed]] = deque(maxlen=_ENDED_KEPT)
        # (start, end) of each utterance closed empty before its final came, by
        # its first speech start: no words if the streams end with none (a late
        # final with words is its turn); each its own, as several may wait
        self.unheard: dict[int, tuple[int, int]] = {}

    def add(self, first_start: int, how: Closed) -> None:
        self.last = how
        self._ended.append((first_start, how))

    def heard(self, start: int | None) -> None:
        """Words came for the utterance of speech start ``start`` (None: the
        last closed): it is no longer one that had none."""
        first = self._first(start)
        if first is not None:
            self.unheard.pop(first, None)

    def _first(self, start: int | None) -> int | None:
        if start is None:
            return self._ended[-1][0] if self._ended else None
        return next((first for first, _ in reversed(self._ended) if first <= start), None)

    def how(self, start: int | None) -> Closed | None:
        """How the utterance of speech start ``start`` ended (None: the last's)."""
        if start is not None:
            for first, closed in reversed(self._ended):
                if first <= start:
                    return closed
        return self.last

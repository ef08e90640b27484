"""When an utterance whose speech stopped is over, sans-I/O: the silence the
user is given, the wait for a final transcript, and the hard cap.

The silence is ``end_silence_s``, or ``unfinished_silence_s`` when the words so
far sound unfinished (a trailing "and", a number being read out). With an
end-of-turn model (``turn_model``) it is judged once per pause, at the
detector's speech end: judged done, ``turn_done_silence_s`` (the words still
count: unfinished-sounding words keep their longer silence); judged not done,
``turn_wait_s``, or up to the cap when the words sound unfinished too; not
judged (the model failed, or its answer has not come), ``end_silence_s`` as
without a model.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..vocab.spacing import join_words
from .decisions import EndReason
from .settings import EndpointSettings
from .utterance import Utterance
from .words import WordJudge


@dataclass(frozen=True, slots=True)
class EndDeadlines:
    """Samples: the end silence is over (``by_model``: the model's done
    judgement shortened it), the wait for a final after the finalize, the cap."""

    quiet_until: int
    wait_until: int
    cap: int
    by_model: bool


class EndRule:
    def __init__(self, settings: EndpointSettings, sample_rate: int, words: WordJudge) -> None:
        self.settings = settings
        self.sample_rate = sample_rate
        self._words = words

    @property
    def judges(self) -> bool:
        """Whether an end-of-turn model judges each pause."""
        return self.settings.turn_model != "none"

    def _n(self, seconds: float) -> int:
        return round(seconds * self.sample_rate)

    def deadlines(self, u: Utterance) -> EndDeadlines:
        s = self.settings
        assert u.end_at is not None and u.finalize_at is not None
        unfinished = s.transcript_shape and self._words.sounds_unfinished(
            join_words(u.finals) or u.partial
        )
        silence_s = s.unfinished_silence_s if unfinished else s.end_silence_s
        by_model = False
        if self.judges and u.done_probability is not None:
            if u.done_probability < s.turn_threshold:
                # both say unfinished ("my number is 555 …"): as long as the cap allows
                silence_s = s.max_delay_s if unfinished else max(silence_s, s.turn_wait_s)
            elif not unfinished:
                silence_s, by_model = s.turn_done_silence_s, True
        # (never before the judgement that shortened it: the model's answer is an input)
        quiet_until = max(u.end_at + self._n(silence_s), (u.judged_at or 0) if by_model else 0)
        return EndDeadlines(
            quiet_until,
            u.finalize_at + self._n(s.final_wait_s),
            u.end_at + self._n(s.max_delay_s),
            by_model,
        )

    def decide(self, u: Utterance, now: int) -> tuple[EndReason, int] | None:
        """Whether the utterance is over at ``now``: why, and the sample it ended at."""
        d = self.deadlines(u)
        text = join_words(u.finals)
        reason: EndReason
        if u.final_at is not None and now >= d.quiet_until:
            reason, at = ("model" if d.by_model else "silence"), max(d.quiet_until, u.final_at)
        elif now >= max(d.quiet_until, d.wait_until) and (text or not u.partial):
            reason, at = "final_timeout", max(d.quiet_until, d.wait_until)
        elif now >= d.cap:
            reason, at = "max_delay", d.cap
        else:
            return None
        return reason, min(at, d.cap)

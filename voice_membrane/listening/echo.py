"""Telling the user's voice from the assistant's own, heard back through the
speaker, without echo cancellation: by level.

While the assistant's audio plays, every window the detector hears as speech
is either echo or the user. A peak follower tracks the echo's level (up fast,
down slowly) from the windows judged echo; a window at least ``margin_db``
louder than it is the user's. Until the follower has heard ``learn_s`` of echo,
and during the first ``warmup_s`` of playout, nothing is the user's (the
warm-up: a room whose echo has not been measured gets no benefit of the
doubt); after the warm-up with no echo heard at all (a headset, a quiet
speaker), speech is the user's.
"""

from __future__ import annotations

_UP = 0.3  # a louder echo window raises the estimate fast
_DOWN = 0.02  # a quieter one lowers it slowly: the estimate sits near the peaks


class EchoLevel:
    def __init__(self, margin_db: float, warmup_samples: int, learn_samples: int) -> None:
        self.margin_db = margin_db
        self.warmup_samples = warmup_samples
        self.learn_samples = learn_samples
        self.level: float | None = None
        self._learned = 0

    def reset(self) -> None:
        self.level, self._learned = None, 0

    def louder(self, level_dbfs: float, playout_samples: int) -> bool:
        """Would speech at this level, ``playout_samples`` into the playout, be
        the user's? (Learns nothing: for a sound the model has not judged.)"""
        if playout_samples < self.warmup_samples:
            return False
        if self.level is None:
            return True  # a whole warm-up without echo
        ready = self._learned >= self.learn_samples
        return ready and level_dbfs >= self.level + self.margin_db

    def judge(self, level_dbfs: float, samples: int, playout_samples: int) -> bool:
        """Is this speech window (heard ``playout_samples`` into the playout)
        the user's? Windows judged echo train the estimate."""
        ready = self._learned >= self.learn_samples and playout_samples >= self.warmup_samples
        if ready and self.level is not None and level_dbfs >= self.level + self.margin_db:
            return True
        if self.level is None and playout_samples >= self.warmup_samples:
            return True  # a whole warm-up without echo: the mic does not hear us
        if self.level is None:
            self.level = level_dbfs
        else:
            rate = _UP if level_dbfs > self.level else _DOWN
            self.level += rate * (level_dbfs - self.level)
        self._learned += samples
        return False

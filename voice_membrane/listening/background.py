"""The adaptive loudness gate: how loud the room's background speech is (a TV,
people talking across the room), so that only speech clearly louder than it
counts as the user's. Sans-I/O, fed one window at a time, counting windows.

Background speech is speech that *persists*: the model has called at least
``_DENSE`` of the last ``_LEARN_S`` seconds speech (a TV: 0.81 or more in every
3 s; a user in a conversation: 0.68 at most, they pause and listen). From such
stretches the gate keeps the levels of the last ``_HORIZON_S`` seconds and
calls the background their 90th percentile (near the loudest, so the TV's own
loud syllables stay under background + margin).

It must not learn the user:

- once a background is known, only windows the gate rejected, heard outside a
  confirmed segment, are learned (the user's speech over the TV is not, so the
  gate cannot ratchet up on it);
- before one is known, a dense stretch is learned only if it is far (its 90th
  percentile under ``_NEAR_DBFS``): a near user talking on for many seconds in
  a quiet room is never taken for a TV;
- what is learned is forgotten ``_HORIZON_S`` after it was heard.

While nothing is known yet but what has been heard is dense (the stream began
with a TV on, or one was switched on), a *start* needs a near level
(``_NEAR_START_DBFS``): the TV cannot open a segment while it is being learned.
Speech already confirmed goes on at the floor.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

_LEARN_S = 3.0  # how long speech must persist before it can be background
_DENSE = 0.75  # the share of its windows the model must call speech
_HORIZON_S = 10.0  # how long a learned level is remembered
_MIN_LEARNED_S = 0.5  # learned speech needed before the gate rises
_NEAR_DBFS = -26.0  # speech whose loud end (90th percentile) reaches this is near
_NEAR_START_DBFS = -28.0  # what starts speech while a background is being learned
_PERCENTILE = 90.0


@dataclass(frozen=True, slots=True)
class Gate:
    """The levels a window must reach: to start speech, and to go on with it."""

    start: float
    go_on: float


class _Sorted:
    """Levels kept sorted (add, remove, percentile in O(n) memmove, no numpy
    call per window: this runs for every 32 ms window)."""

    def __init__(self) -> None:
        self.items: list[float] = []

    def add(self, level: float) -> None:
        bisect.insort(self.items, level)

    def remove(self, level: float) -> None:
        del self.items[bisect.bisect_left(self.items, level)]

    def percentile(self, q: float) -> float:
        """As ``numpy.percentile`` (linear) of a non-empty list."""
        at = (len(self.items) - 1) * q / 100.0
        lo = math.floor(at)
        hi = min(lo + 1, len(self.items) - 1)
        return self.items[lo] + (self.items[hi] - self.items[lo]) * (at - lo)


class BackgroundLevel:
    """``window(speech, level, speaking) -> Gate`` for that window, from what
    was heard before it; ``background`` is the learned level (None: none).

    ``speech`` is the model's verdict before any level gate; ``speaking``
    whether the detector was in a confirmed segment before this window."""

    def __init__(self, floor: float, margin_db: float, window_s: float) -> None:
        self.floor = floor
        self.margin_db = margin_db
        self._learn = max(1, round(_LEARN_S / window_s))
        self._horizon = max(1, round(_HORIZON_S / window_s))
        self._min_learned = max(1, round(_MIN_LEARNED_S / window_s))
        self.reset()

    def reset(self) -> None:
        self._index = 0
        self._recent: deque[float | None] = deque(maxlen=self._learn)  # level if speech
        self._speech_count = 0
        self._recent_sorted = _Sorted()  # the speech levels in _recent
        self._learned: deque[tuple[int, float]] = deque()  # (window index, level)
        self._learned_sorted = _Sorted()
        self._first_speech: int | None = None  # the session's first speech window
        self.background: float | None = None

    def gate(self) -> Gate:
        """The gate for the next window."""
        if self.background is not None:
            level = max(self.floor, self.background + self.margin_db)
            return Gate(level, level)
        if self._speech_count >= _DENSE * self._heard_span() and self._far():
            level = max(self.floor, _NEAR_START_DBFS)
            return Gate(level, level)
        return Gate(self.floor, self.floor)

    def window(self, speech: bool, level: float, speaking: bool) -> Gate:
        """Gate this window by what was heard before it, then learn from it."""
        gate = self.gate()
        # density counts the model's verdict at any level (a TV's soft
        # syllables are speech too); only levels above the floor are learned
        if len(self._recent) == self._learn and (oldest := self._recent[0]) is not None:
            self._speech_count -= 1
            self._recent_sorted.remove(oldest)
        self._recent.append(level if speech else None)
        if speech:
            self._speech_count += 1
            self._recent_sorted.add(level)
        if speech and self._first_speech is None:
            self._first_speech = self._index
        elif self._speech_count == 0 and len(self._recent) == self._learn:
            self._first_speech = None  # _LEARN_S of quiet: the next speech starts afresh
        dense = len(self._recent) == self._learn and self._speech_count >= _DENSE * self._learn
        if speech and level >= self.floor and dense and self._learnable(level, gate, speaking):
            self._learned.append((self._index, level))
            self._learned_sorted.add(level)
        while self._learned and self._learned[0][0] <= self._index - self._horizon:
            self._learned_sorted.remove(self._learned.popleft()[1])
        self._index += 1
        if len(self._learned) >= self._min_learned:
            self.background = self._learned_sorted.percentile(_PERCENTILE)
        else:
            self.background = None
        return gate

    def _heard_span(self) -> int:
        # the last _LEARN_S, but only from the first speech after quiet (a TV
        # switched on, or on when listening starts, is dense from its first word)
        if self._first_speech is None:
            return self._learn + 1  # nothing heard: never dense
        return min(self._learn, self._index - self._first_speech)

    def _learnable(self, level: float, gate: Gate, speaking: bool) -> bool:
        if self.background is not None:
            return level < gate.go_on and not speaking
        return self._far()

    def _far(self) -> bool:
        # the recent speech's loud end is under a near talker's
        levels = self._recent_sorted
        return bool(levels.items) and levels.percentile(_PERCENTILE) < _NEAR_DBFS

"""The adaptive loudness gate: how loud the room's background speech is (a TV,
people talking across the room), so that only speech clearly louder than it
counts as the user's. Sans-I/O, fed one window at a time, counting windows.

Background speech is speech that *persists*: the model has called at least
``_DENSE`` of the last ``_LEARN_S`` seconds speech (a TV: 0.81 or more in every
3 s; a user in a conversation: 0.68 at most, they pause and listen). From such
stretches the gate keeps the levels of the last ``_HORIZON_S`` seconds and
calls the background their 90th percentile (near the loudest, so the TV's own
loud syllables stay under background + margin).

It must not learn the user. Their *accepted* speech — a confirmed segment
that started at the floor in a quiet room, or over a known background — and
the ``_HOLD_S`` after it (a breath, their soft syllables the gate shut, their
next phrase's start) is theirs however long they talk on:

- before a background is known, none of it is learned (a dense stretch is
  learned only if it is not the user's and far: its 90th percentile under
  ``_NEAR_DBFS``, so a near talker is never taken for a TV either);
- once one is known, only windows the gate rejected, outside a confirmed
  segment, are learned; near the user's speech no louder than the background
  (the TV heard in their pauses keeps it known, their voice never raises it);
- what is learned is forgotten ``_HORIZON_S`` later, not counting the time
  near the user's speech (a TV they talk over is still known when they stop).

While nothing is known yet, dense far speech that is someone else's needs a
near level (``_NEAR_START_DBFS``) to *start*, so a TV cannot open a segment
while it is being learned. Someone else's: it was already going when live
listening began (a TV left on; a recording's first words are its speaker's),
or it is ``_UNDER_USER_DB`` under the user's accepted speech and not part of a
stretch they began (a TV switched on after they spoke, not a voice that drops
as it goes on), or it has gone on for ``_TALK_ON_S`` with no ``_LEARN_S`` of
quiet (a TV switched on before anyone spoke: heard that long, then learned).
A user who starts to talk in a quiet room starts at the floor, however
softly, and is heard to the end.

The old rule (issue 43) took the level alone for distance: dense speech under
-26 dBFS was learned, accepted or not, so a user talking on at -28 dBFS was
learned as the room's background within 5-10 s and gated out.
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
_ONGOING_S = 0.5  # speech heard this soon after listening began was already going
_HOLD_S = 3.0  # after the user's accepted speech, what is heard is still theirs
_TALK_ON_S = 45.0  # longer than this with no pause of _LEARN_S, dense speech is not a user's
_USER_S = 10.0  # how much of the user's accepted speech their level is taken from
_UNDER_USER_DB = 12.0  # dense speech this far under the user's own is someone else


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
    ``ongoing_is_background``: speech going as listening begins is someone
    else's (live audio), not the user's (a recording that starts mid-speech).

    ``speech`` is the model's verdict before any level gate; ``speaking``
    whether the detector was in a confirmed segment before this window."""

    def __init__(
        self, floor: float, margin_db: float, window_s: float, *, ongoing_is_background: bool = True
    ) -> None:
        self.floor = floor
        self.margin_db = margin_db
        self._learn = max(1, round(_LEARN_S / window_s))
        # off for a recording: its first words are the user's, not a TV left on
        self._ongoing = max(1, round(_ONGOING_S / window_s)) if ongoing_is_background else 0
        self._talk_on = max(1, round(_TALK_ON_S / window_s))
        self._hold = max(1, round(_HOLD_S / window_s))
        self._horizon = max(1, round(_HORIZON_S / window_s))
        self._min_learned = max(1, round(_MIN_LEARNED_S / window_s))
        self._user_size = max(1, round(_USER_S / window_s))
        self.reset()

    def reset(self) -> None:
        self._index = 0
        self._recent: deque[float | None] = deque(maxlen=self._learn)  # level if speech
        self._speech_count = 0
        self._recent_sorted = _Sorted()  # the speech levels in _recent
        self._learned: deque[tuple[int, float]] = deque()  # (_clock, level)
        self._clock = 0  # windows heard, less those near the user's speech
        self._learned_sorted = _Sorted()
        self._first_speech: int | None = None  # the session's first speech window
        self._user: deque[float] = deque()  # the user's accepted speech levels, newest last
        self._user_sorted = _Sorted()
        self._was_speaking = False
        self._users = False  # the segment going on (or the last) is the user's
        self._users_until = -1  # the user's speech and breath: never learned up to here
        self._users_stretch: int | None = None  # first window of the stretch the user began
        self.background: float | None = None

    def gate(self) -> Gate:
        """The gate for the next window."""
        if self.background is not None:
            level = max(self.floor, self.background + self.margin_db)
            return Gate(level, level)
        if self._suspect():
            level = max(self.floor, _NEAR_START_DBFS)
            return Gate(level, level)
        return Gate(self.floor, self.floor)

    def window(self, speech: bool, level: float, speaking: bool) -> Gate:
        """Gate this window by what was heard before it, then learn from it."""
        gate = self.gate()
        self._follow_user(speech, level, speaking)
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
        if speech and level >= self.floor and dense:
            learned = self._learned_level(level, gate, speaking)
            if learned is not None:
                self._learned.append((self._clock, learned))
                self._learned_sorted.add(learned)
        # forgotten _HORIZON_S later, not counting the user's talk: a TV the
        # user talks over for a minute is still known when they stop
        while self._learned and self._learned[0][0] <= self._clock - self._horizon:
            self._learned_sorted.remove(self._learned.popleft()[1])
        if self._index > self._users_until:
            self._clock += 1
        self._index += 1
        if len(self._learned) >= self._min_learned:
            self.background = self._learned_sorted.percentile(_PERCENTILE)
        else:
            self.background = None
        return gate

    def _follow_user(self, speech: bool, level: float, speaking: bool) -> None:
        # A segment is the user's when it rose over a known background, or
        # when the speech it began in is not someone else's (_other): a TV's
        # loud syllables that leak through while it is learned are not.
        if speaking and not self._was_speaking:
            self._users = self.background is not None or not self._other()
            if self._users:
                self._users_stretch = self._first_speech
        self._was_speaking = speaking
        if not (speaking and self._users):
            return
        self._users_until = self._index + self._hold
        if speech and level >= self.floor:
            if len(self._user) == self._user_size:
                self._user_sorted.remove(self._user.popleft())
            self._user.append(level)
            self._user_sorted.add(level)

    def _heard_span(self) -> int:
        # the last _LEARN_S, but only from the first speech after quiet (a TV
        # switched on, or on when listening starts, is dense from its first word)
        if self._first_speech is None:
            return self._learn + 1  # nothing heard: never dense
        return min(self._learn, self._index - self._first_speech)

    def _suspect(self) -> bool:
        # dense far speech that is not (yet) known to be the user's: only near
        # speech starts while it is learned
        return self._speech_count >= _DENSE * self._heard_span() and self._far() and self._other()

    def _learned_level(self, level: float, gate: Gate, speaking: bool) -> float | None:
        """What this dense speech window teaches the background (None: nothing).

        The user's speech, and what is heard between their phrases (their
        soft syllables under the gate, their next phrase's start) never raise
        it, however long they talk on: over a known background only what the
        gate kept out is learned, and near the user's speech no louder than
        the background (the TV heard in their pauses keeps it known)."""
        near_user = self._index <= self._users_until
        if self.background is not None:
            if speaking or level >= gate.go_on:
                return None
            return min(level, self.background) if near_user else level
        return None if near_user or not self._far() else level

    def _other(self) -> bool:
        # the dense speech is someone else's: it was already going when
        # listening began (a TV left on), it has gone on longer than anyone
        # talks to an assistant (a TV switched on in a quiet room), or it is
        # far under the user's own level (a TV switched on after they spoke).
        # A user who starts to talk on in a quiet room, however softly, starts
        # at the floor and is heard for _TALK_ON_S.
        first = self._first_speech
        if first is not None and (first < self._ongoing or self._index - first >= self._talk_on):
            return True
        if first is not None and first == self._users_stretch:
            return False  # the stretch the user began, their voice dropping as they go on
        if not self._user_sorted.items or not self._recent_sorted.items:
            return False
        user = self._user_sorted.percentile(_PERCENTILE)
        return self._recent_sorted.percentile(_PERCENTILE) < user - _UNDER_USER_DB

    def _far(self) -> bool:
        # the recent speech's loud end is under a near talker's
        levels = self._recent_sorted
        return bool(levels.items) and levels.percentile(_PERCENTILE) < _NEAR_DBFS

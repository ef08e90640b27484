"""A sudden rise of the input's level: maybe speech beginning, told before the
model can (Silero at 8 kHz scores an /s/ near 0; the vowel that it does score
comes 100-130 ms later). Sans-I/O, fed one short block at a time with the
detector's start gate, counting blocks (never the clock).

A block is *loud* when it is ``rise_db`` above the running floor and at or
above the gate (the detector's own: the floor level, or the room's background
speech plus its margin, background.py). ``rise_s`` of consecutive loud blocks
make a ``LevelRise``; after one, ``_REARM_S`` of blocks that are not loud
must pass before the next (one per word, not one per syllable).

The floor follows the quietest blocks: down at once, up by ``_FLOOR_UP_DB_S``
a second, so a noise that steps up and stays (a fan switched on) rises once
and is then the floor.
"""

from __future__ import annotations

from .vad import LevelRise

_FLOOR_UP_DB_S = 6.0  # how fast the floor climbs towards a louder steady level
_REARM_S = 0.1  # not loud for this long before another rise can come


class LevelRiseWatch:
    """``block(at, samples, level, gate) -> LevelRise | None``, blocks
    contiguous from sample 0; positions at the rate given."""

    def __init__(self, rise_db: float, rise_s: float, block_samples: int, rate: int) -> None:
        self.rise_db = rise_db
        block_s = block_samples / rate
        self._needed = max(1, round(rise_s / block_s))
        self._rearm = max(1, round(_REARM_S / block_s))
        self._up = _FLOOR_UP_DB_S * block_s
        self.reset()

    def reset(self) -> None:
        self.floor: float | None = None  # None: nothing heard yet
        self._loud = 0  # consecutive loud blocks
        self._quiet = 0  # consecutive blocks that are not loud
        self._from = 0  # where the loud run began
        self._quietest = 0.0  # the quietest block of the loud run
        self._armed = True

    def block(self, at: int, samples: int, level: float, gate: float) -> LevelRise | None:
        floor = self.floor
        loud = floor is not None and level >= max(gate, floor + self.rise_db)
        # the floor moves after the block is judged: a block is measured
        # against what came before it
        if floor is None or level < floor:
            self.floor = level
        else:
            self.floor = min(level, floor + self._up)
        if not loud:
            self._loud = 0
            self._quiet += 1
            if self._quiet >= self._rearm:
                self._armed = True
            return None
        self._quiet = 0
        if self._loud == 0:
            self._from, self._quietest = at, level
        self._loud += 1
        self._quietest = min(self._quietest, level)
        if self._loud >= self._needed and self._armed:
            self._armed = False
            return LevelRise(self._from, at + samples, self._quietest)
        return None

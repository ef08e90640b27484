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
        rises = self.blocks(at, samples, [level], gate)
        return rises[0] if rises else None

    def blocks(self, at: int, size: int, levels: list[float], gate: float) -> list[LevelRise]:
        """Consecutive blocks of ``size`` samples from ``at``, judged under one
        ``gate``: the rises they make, in order. (One call per run of blocks:
        a call's 50 frames a second, each of a few blocks, pay one call each.)"""
        rises: list[LevelRise] = []
        floor, up, rise_db = self.floor, self._up, self.rise_db
        loud_run, quiet_run, armed = self._loud, self._quiet, self._armed
        for level in levels:
            loud = floor is not None and level >= gate and level >= floor + rise_db
            # the floor moves after the block is judged: a block is measured
            # against what came before it (down at once, up by ``up`` at most)
            if floor is None or level < floor + up:
                floor = level
            else:
                floor += up
            if not loud:
                loud_run = 0
                quiet_run += 1
                if quiet_run >= self._rearm:
                    armed = True
            else:
                quiet_run = 0
                if loud_run == 0:
                    self._from, self._quietest = at, level
                loud_run += 1
                if level < self._quietest:
                    self._quietest = level
                if loud_run >= self._needed and armed:
                    armed = False
                    rises.append(LevelRise(self._from, at + size, self._quietest))
            at += size
        self.floor, self._loud, self._quiet, self._armed = floor, loud_run, quiet_run, armed
        return rises

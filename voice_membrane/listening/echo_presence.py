"""Does the reply come back into the microphone at all? Sans-I/O.

AEC3's suppressor, where no echo comes back (headphones), never measures an
echo path and ducks whatever is said over the reply: a user over an answer
in headphones paused it 388-480 ms after their onset instead of 64-68
(docs/listening.md, "Echo cancellation"). So the canceller hands on its
cleaned audio only while the reply's echo is heard; else the microphone's
own.

The test is the one a person would make: does the microphone's loudness
follow the reply's, some delay later? Every ``_EVERY`` blocks, over the last
``_WINDOW`` 10 ms blocks (or as many as there are) in which the reply spoke
in at least ``_ACTIVE``, at each lag up to ``_MAX_LAG``:

- for an echo, the correlation of the near blocks' loudness with the far
  ones' (0.79-1.00 over a speaker: a PulseAudio loopback, and offline at -20
  and -10 dB, 20-200 ms, reverb); an echo from ``ECHO_AT``. A user talking
  over the reply drops it (to 0.01), so a low one proves nothing;
- against one, the share of the reply's spoken blocks in which the near
  stayed at its floor (1.0 in headphones; never above 0.31 with an echo, the
  user talking over it or not: a voice adds sound, it never takes the
  echo's away); none from ``NO_ECHO_QUIET``.

An echo is assumed until shown otherwise: a self-interruption is worse than
words ducked in the first second of the first answer.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..vocab.audio import Samples

_WINDOW = 300  # blocks judged together (3 s)
_MAX_LAG = 40  # blocks (400 ms): past AEC3's reach an echo is not cancelled anyway
_EVERY = 25  # blocks between judgements
_ACTIVE = 60  # of the window's far blocks, at least this many loud enough to judge
_LOUD_DB = -50.0  # dBFS: a far block quieter than this plays nothing
_SPOKEN_DB = 20.0  # far blocks within this of the window's loudest are the reply speaking
_FLOOR_DB = 6.0  # near blocks within this of its 10th percentile are its floor: quiet
ECHO_AT = 0.6  # correlation at or above which the echo is heard
NO_ECHO_QUIET = 0.5  # the share of the reply's spoken blocks the near stayed quiet in
_FULL = 32768.0


def _level_db(block: Samples) -> float:
    x = block.astype(np.float64)
    return 10.0 * math.log10(float(np.dot(x, x)) / (len(x) * _FULL * _FULL) + 1e-10)


class EchoPresence:
    """``feed(far, near)`` per 10 ms block (the far block paired with it, the
    raw near block) → whether an echo of the far audio is in the near."""

    def __init__(self) -> None:
        self._far: list[float] = []  # dBFS per block, the last _WINDOW + _MAX_LAG
        self._near: list[float] = []
        self._fed = 0
        self.echo = True
        self.correlation: float | None = None  # the last judgement's evidence for an echo
        self.quiet: float | None = None  # and against one

    def feed(self, far: Samples, near: Samples) -> bool:
        self._far.append(_level_db(far))
        self._near.append(_level_db(near))
        if len(self._far) > 2 * (_WINDOW + _MAX_LAG):  # (trimmed now and then, not per block)
            del self._far[: -(_WINDOW + _MAX_LAG)], self._near[: -(_WINDOW + _MAX_LAG)]
        self._fed += 1
        if self._fed % _EVERY == 0:
            self._judge()
        return self.echo

    def _judge(self) -> None:
        far = np.array(self._far[-(_WINDOW + _MAX_LAG) :])
        near = np.array(self._near[-(_WINDOW + _MAX_LAG) :][_MAX_LAG:])
        whole = _evidence(far, near)
        if whole is None:
            return  # the reply said too little lately to tell
        self.correlation, self.quiet = whole
        if self.correlation >= ECHO_AT:
            self.echo = True
        elif self.quiet >= NO_ECHO_QUIET:
            self.echo = False


def _evidence(far: np.ndarray, near: np.ndarray) -> tuple[float, float] | None:
    """Over ``near`` and the far blocks at each lag up to ``_MAX_LAG`` before
    it: the best correlation of their loudness, and the smallest share of the
    reply's spoken blocks the near stayed at its floor in (None: the reply
    spoke in fewer than ``_ACTIVE`` blocks)."""
    size = len(near)
    if size < _ACTIVE:
        return None
    loud = max(float(far.max()) - _SPOKEN_DB, _LOUD_DB)
    # the far windows ending 0.._MAX_LAG blocks before the near's end, a row each
    windows = sliding_window_view(far, size)
    spoken = windows >= loud
    counts = spoken.sum(axis=1)
    judged = counts >= _ACTIVE
    if not judged.any():
        return None
    windows, spoken, counts = windows[judged], spoken[judged], counts[judged]
    floor = float(np.partition(near, size // 10)[size // 10]) + _FLOOR_DB  # its 10th percentile
    quiet = (spoken & (near <= floor)).sum(axis=1) / counts
    centred = windows - windows.mean(axis=1, keepdims=True)
    near_centred = near - near.mean()
    scale = np.sqrt((centred * centred).sum(axis=1) * float(near_centred @ near_centred))
    products = centred @ near_centred
    correlations = np.divide(products, scale, out=np.zeros_like(products), where=scale > 0)
    return float(correlations.max()), float(quiet.min())

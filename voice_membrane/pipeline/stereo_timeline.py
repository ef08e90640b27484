"""Two channels on one timeline, sans-I/O: the listener's voice on the left,
the assistant's on the right, each placed at the sample where it was heard.

Samples are placed at any position not yet taken out (an utterance is placed
when it ends, seconds after it began to play); ``take`` hands out the settled
stretch from the start, silence where nothing was placed, and forgets it.
A channel's later placement over an earlier one replaces it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Stereo = npt.NDArray[np.int16]  # shape (n, 2): left, right

LEFT, RIGHT = 0, 1


class StereoTimeline:
    def __init__(self, rate: int, origin_ns: int) -> None:
        self.rate, self.origin_ns = rate, origin_ns
        self.start = 0  # the first sample not yet taken out
        self._held = np.zeros((0, 2), dtype=np.int16)  # from ``start``

    def at(self, ns: int) -> int:
        """The sample of ``perf_counter_ns`` time ``ns``."""
        return round((ns - self.origin_ns) * self.rate / 1e9)

    @property
    def end(self) -> int:
        """One past the last sample placed."""
        return self.start + len(self._held)

    def place(self, channel: int, samples: npt.NDArray[np.int16], at: int) -> None:
        """``samples`` on ``channel`` from sample ``at``; what falls before the
        start (already taken out) is lost."""
        if at < self.start:
            samples, at = samples[self.start - at :], self.start
        if not len(samples):
            return
        offset = at - self.start
        need = offset + len(samples)
        if need > len(self._held):
            grown = np.zeros((need, 2), dtype=np.int16)
            grown[: len(self._held)] = self._held
            self._held = grown
        self._held[offset:need, channel] = samples

    def take(self, until: int) -> Stereo:
        """The samples from the start up to ``until`` (silence past what was
        placed); they are forgotten."""
        n = max(0, until - self.start)
        out = np.zeros((n, 2), dtype=np.int16)
        kept = min(n, len(self._held))
        out[:kept] = self._held[:kept]
        self._held = self._held[kept:]
        self.start += n
        return out

"""A call's audio at twice its rate (8 kHz to the listener's 16 kHz), the same
samples as ``StreamResampler(rate, 2 * rate)`` gives, in a few array passes.

Linear interpolation at half-sample positions: output ``2k`` is input ``k``,
output ``2k + 1`` is the mean of inputs ``k`` and ``k + 1`` rounded half to
even (``np.rint``, as ``np.round`` rounds the resampler's exact
``a + (b - a) * 0.5``; the means of int16 samples are exact in float64). As the
resampler, a sample is produced once the input after its position has
come, so the chunking never changes the output; it is 50 frames a second of
every call, where the general resampler's bookkeeping cost more than the audio.
"""

from __future__ import annotations

import numpy as np

from ..vocab.audio import Samples

_NONE: Samples = np.zeros(0, dtype=np.int16)


class Doubler:
    def __init__(self) -> None:
        self._last: float | None = None  # the last sample: the next first mean needs it

    def feed(self, samples: Samples) -> Samples:
        n = len(samples)
        if n == 0:
            return _NONE
        first = self._last is None
        seq = np.empty(n + 1, dtype=np.float64)  # the sample before, then these
        seq[0] = samples[0] if self._last is None else self._last
        seq[1:] = samples
        self._last = float(seq[-1])
        mids = seq[:-1] + seq[1:]
        mids *= 0.5
        np.rint(mids, out=mids)
        out = np.empty(2 * n, dtype=np.int16)
        out[0::2] = mids
        out[1::2] = samples
        # (the first chunk has no mean before its first sample)
        return out[1:] if first else out

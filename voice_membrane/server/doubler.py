"""A call's audio at twice its rate (8 kHz to the listener's 16 kHz), the same
samples as ``StreamResampler(rate, 2 * rate)`` gives, in a few array passes.

Linear interpolation at half-sample positions: output ``2k`` is input ``k``,
output ``2k + 1`` is the mean of inputs ``k`` and ``k + 1`` rounded half to
even (as ``np.round`` rounds the resampler's exact ``a + (b - a) * 0.5``). As
the resampler, a sample is produced once the input after its position has
come, so the chunking never changes the output; it is 50 frames a second of
every call, where the general resampler's bookkeeping cost more than the audio.
"""

from __future__ import annotations

import numpy as np

from ..vocab.audio import Samples

_NONE: Samples = np.zeros(0, dtype=np.int16)


class Doubler:
    def __init__(self) -> None:
        # The input's last sample (one element): the next chunk's first mean needs it.
        self._last: np.ndarray[tuple[int], np.dtype[np.int32]] | None = None

    def feed(self, samples: Samples) -> Samples:
        if len(samples) == 0:
            return _NONE
        first = self._last is None
        seq = samples.astype(np.int32)
        if self._last is not None:
            seq = np.concatenate([self._last, seq])
        self._last = seq[-1:]
        total = seq[:-1] + seq[1:]
        half = total >> 1  # floor; an odd total's .5 goes to the even neighbour
        mids = half + (total & half & 1)
        out = np.empty(2 * len(mids) + first, dtype=np.int16)
        if first:
            out[0] = seq[0]
        out[first::2] = mids
        out[first + 1 :: 2] = seq[1:]
        return out

"""A call's audio at twice its rate (8 kHz to the listener's 16 kHz), the same
samples as ``StreamResampler(rate, 2 * rate)`` gives, in a few array passes.

Linear interpolation at half-sample positions: output ``2k`` is input ``k``,
output ``2k + 1`` is the mean of inputs ``k`` and ``k + 1`` rounded half to
even (as ``np.round`` rounds the resampler's exact ``a + (b - a) * 0.5``). As
the resampler, a sample is produced once the input after its position has
come, so the chunking never changes the output; it is 50 frames a second of
every call, where the general resampler's bookkeeping cost more than the audio.

``UlawDoubler`` does the same from a call's μ-law bytes: with 256 codes there
are 65,536 pairs, so each pair's mean is looked up (a table of 128 KiB, made
once) rather than computed, and a frame is half as many array passes.
"""

from __future__ import annotations

import numpy as np

from ..vocab.audio import Samples, pcm16_from_ulaw

_NONE: Samples = np.zeros(0, dtype=np.int16)
_Wide = np.ndarray[tuple[int], np.dtype[np.int32]]


def _mean_half_even(a: _Wide, b: _Wide) -> _Wide:
    """(a + b) / 2 rounded half to even."""
    total: _Wide = a + b
    half: _Wide = total >> 1  # floor; an odd total's .5 goes to the even neighbour
    mean: _Wide = half + (total & half & 1)
    return mean


class Doubler:
    def __init__(self) -> None:
        # The input's last sample (one element): the next chunk's first mean needs it.
        self._last: _Wide | None = None

    def feed(self, samples: Samples) -> Samples:
        if len(samples) == 0:
            return _NONE
        first = self._last is None
        seq = samples.astype(np.int32)
        if self._last is not None:
            seq = np.concatenate([self._last, seq])
        self._last = seq[-1:]
        mids = _mean_half_even(seq[:-1], seq[1:])
        out = np.empty(2 * len(mids) + first, dtype=np.int16)
        if first:
            out[0] = seq[0]
        out[first::2] = mids
        out[first + 1 :: 2] = seq[1:]
        return out


_CODE_SAMPLES: Samples = pcm16_from_ulaw(bytes(range(256)))  # each code's sample
_wide = _CODE_SAMPLES.astype(np.int32)
# the mean of the samples of codes a and b, at (a << 8) | b
_PAIR_MEANS: Samples = _mean_half_even(np.repeat(_wide, 256), np.tile(_wide, 256)).astype(np.int16)


class UlawDoubler:
    """``Doubler().feed(pcm16_from_ulaw(data))``, from the bytes."""

    def __init__(self) -> None:
        self._last: int | None = None  # the last code fed

    def feed(self, data: bytes) -> Samples:
        codes = np.frombuffer(data, dtype=np.uint8)
        n = len(codes)
        if n == 0:
            return _NONE
        first = self._last is None
        pairs = np.empty(n + 1, dtype=np.uint16)  # the code before each, then each
        pairs[0] = codes[0] if self._last is None else self._last
        pairs[1:] = codes
        self._last = int(codes[-1])
        out = np.empty(2 * n, dtype=np.int16)
        out[0::2] = _PAIR_MEANS[(pairs[:-1] << 8) | pairs[1:]]
        out[1::2] = _CODE_SAMPLES[codes]
        # (the first frame has no mean before its first sample)
        return out[1:] if first else out

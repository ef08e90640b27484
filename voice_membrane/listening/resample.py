"""A streaming linear resampler whose output does not depend on how the input
is chunked (``vocab.audio.resample`` works one chunk at a time, so its chunk
edges would move the detector's verdicts)."""

from __future__ import annotations

import numpy as np

from ..vocab.audio import Samples


class StreamResampler:
    """Output sample ``k`` is the input interpolated at ``k * src / dst``,
    produced once the input sample after that position has arrived."""

    def __init__(self, src_rate: int, dst_rate: int) -> None:
        self.src_rate = src_rate
        self.dst_rate = dst_rate
        self.reset()

    def reset(self) -> None:
        self._tail = np.zeros(0, dtype=np.float64)  # input kept for the next call
        self._tail_at = 0  # input index of the tail's first sample
        self._produced = 0

    def feed(self, samples: Samples) -> Samples:
        if self.src_rate == self.dst_rate:
            return samples
        buf = np.concatenate([self._tail, samples.astype(np.float64)])
        end = self._tail_at + len(buf)  # input samples seen so far
        step = self.src_rate / self.dst_rate
        # outputs whose position p has input floor(p)+1 < end (or p exactly on the last)
        last = int((end - 1) * self.dst_rate // self.src_rate)
        ks = np.arange(self._produced, last + 1, dtype=np.float64)
        out = np.zeros(0, dtype=np.int16)
        if len(ks):
            pos = ks * step - self._tail_at
            out = np.round(np.interp(pos, np.arange(len(buf)), buf)).astype(np.int16)
            self._produced = last + 1
        # keep from the sample before the next output's position (never past the end)
        keep_from = min(len(buf), max(0, int(self._produced * step) - self._tail_at - 1))
        self._tail = buf[keep_from:]
        self._tail_at += keep_from
        return out

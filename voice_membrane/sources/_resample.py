"""Sample-rate conversion for a stream: a low-pass filter, then linear interpolation.

``vocab.audio.resample`` converts one chunk on its own (fine for speech going
out to a speaker). Input going to a recognizer comes in many small blocks and is
often 44.1/48 kHz going to 16 kHz, so this converter keeps state across blocks
(the output never depends on how the input was cut) and, when it reduces the
rate, first removes what the lower rate cannot hold (a Kaiser-windowed sinc
low-pass at 90 % of the new Nyquist frequency) so that hiss above it does not
fold back into the speech band. Sans-I/O: ``feed`` and ``flush``.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]

_TAPS_PER_RATIO = 24  # filter half-length per unit of rate ratio: ~1.6 kHz transition
_KAISER_BETA = 8.0  # ~80 dB stop-band


def lowpass_taps(src_rate: int, dst_rate: int) -> Floats:
    """The anti-aliasing filter for going from ``src_rate`` down to ``dst_rate``
    (unit gain at 0 Hz); a single unit tap when nothing needs removing."""
    if dst_rate >= src_rate:
        return np.ones(1)
    half = math.ceil(_TAPS_PER_RATIO * src_rate / dst_rate)
    n = np.arange(-half, half + 1, dtype=np.float64)
    cutoff = 0.9 * 0.5 * dst_rate / src_rate  # cycles per input sample
    taps = 2 * cutoff * np.sinc(2 * cutoff * n) * np.kaiser(len(n), _KAISER_BETA)
    result: Floats = taps / taps.sum()
    return result


class StreamResampler:
    """Converts a stream of samples from ``src_rate`` to ``dst_rate``.

    ``feed`` returns what can be computed so far (float64, in the input's
    units); ``flush`` the rest. In all, N input samples give
    ``round(N * dst_rate / src_rate)`` outputs, the same however the input was
    split. Output sample k is the filtered input at position k * src/dst,
    computed in exact integer arithmetic so nothing drifts over hours.
    """

    def __init__(self, src_rate: int, dst_rate: int) -> None:
        if src_rate <= 0 or dst_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {src_rate} and {dst_rate}")
        g = math.gcd(src_rate, dst_rate)
        self._down = src_rate // g  # output k sits at input k * down / up
        self._up = dst_rate // g
        self._taps = lowpass_taps(src_rate, dst_rate)
        self._history: Floats = np.zeros(len(self._taps) - 1)
        self._skip = (len(self._taps) - 1) // 2  # the filter's delay, dropped at the start
        self._fed = 0  # input samples fed
        self._filtered: Floats = np.zeros(0)  # filtered input from index _base on
        self._base = 0
        self._count = 0  # filtered samples produced (index of the next one)
        self._k = 0  # index of the next output
        self._flushed = False

    @property
    def passthrough(self) -> bool:
        return self._up == self._down

    def feed(self, samples: npt.NDArray[np.generic]) -> Floats:
        if self._flushed:
            raise ValueError("feed after flush")
        x = np.asarray(samples, dtype=np.float64)
        self._fed += len(x)
        if self.passthrough:
            return x
        return self._interpolate(self._filter(x), final=False)

    def flush(self) -> Floats:
        """The rest of the output; the converter takes no more input afterwards."""
        if self._flushed:
            return np.zeros(0)
        self._flushed = True
        if self.passthrough:
            return np.zeros(0)
        tail = self._filter(np.zeros((len(self._taps) - 1) // 2))
        return self._interpolate(tail, final=True)

    def _filter(self, x: Floats) -> Floats:
        if len(self._taps) == 1 or len(x) == 0:
            return x  # (np.convolve swaps its operands when x is empty: not "valid")
        buffer = np.concatenate((self._history, x))
        self._history = buffer[len(buffer) - len(self._history) :]
        y: Floats = np.convolve(buffer, self._taps, mode="valid")
        if self._skip:
            dropped = min(self._skip, len(y))
            self._skip -= dropped
            y = y[dropped:]
        return y

    def _interpolate(self, y: Floats, *, final: bool) -> Floats:
        self._filtered = np.concatenate((self._filtered, y))
        self._count += len(y)
        up, down = self._up, self._down
        if final:
            last = round(self._fed * up / down) - 1  # the last output's index
            if last < self._k or self._count == 0:
                return np.zeros(0)
            # Outputs past the last input sample hold its value.
            need = (last * down) // up + 2 - self._base
            pad = max(0, need - len(self._filtered))
            self._filtered = np.concatenate((self._filtered, np.full(pad, self._filtered[-1])))
        else:
            # Output k needs inputs floor(k*down/up) and the one after it.
            last = ((self._count - 1) * up - 1) // down
            if last < self._k:
                return np.zeros(0)
        ks = np.arange(self._k, last + 1, dtype=np.int64)
        index = (ks * down) // up
        frac = ((ks * down) % up) / up
        at = index - self._base
        out: Floats = self._filtered[at] * (1.0 - frac) + self._filtered[at + 1] * frac
        self._k = last + 1
        keep_from = (self._k * down) // up  # the next output's first input
        cut = min(keep_from - self._base, len(self._filtered))
        self._filtered = self._filtered[cut:]
        self._base += cut
        return out


def to_int16(x: npt.NDArray[np.floating]) -> npt.NDArray[np.int16]:
    """Samples in int16 units, rounded and clipped to int16."""
    out: npt.NDArray[np.int16] = np.clip(np.round(x), -32768, 32767).astype(np.int16)
    return out

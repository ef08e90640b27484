"""Band-limited upsampling by a whole factor (8 kHz telephone audio to 16 kHz).

``audio.resample`` interpolates linearly: cheap, but it leaves attenuated
mirror images of the 0-4 kHz band at 4-8 kHz. Whisper hears them: on the phone
fixtures tiny.en made 9 word errors of 61 from linearly upsampled audio and 5
from this (docs/stt.md). pocketsphinx's 16 kHz model is the opposite case (it
did worse without the images), so its engine keeps the linear one.

A Kaiser-windowed sinc low-pass at 95 % of the input's Nyquist frequency,
applied polyphase (each output phase is one short convolution of the input).
Whole buffers only: the whisper engine upsamples the utterance it decodes.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt

from .audio import Samples

_HALF = 32  # taps each side per output phase: a ~200 Hz transition at 8 kHz in
_BETA = 8.0  # ~80 dB stop-band
_CUTOFF = 0.95  # of the input's Nyquist frequency


@cache
def _phases(factor: int) -> npt.NDArray[np.float64]:
    """The filter's taps as ``factor`` rows: row p makes output phase p."""
    n = np.arange(-_HALF * factor, _HALF * factor + 1, dtype=np.float64)
    cutoff = _CUTOFF * 0.5 / factor  # cycles per output sample
    taps = 2 * cutoff * np.sinc(2 * cutoff * n) * np.kaiser(len(n), _BETA)
    taps *= factor / taps.sum()  # unit gain at 0 Hz after the zeros between samples
    # Output factor*i + p sums x[i-k] * taps[factor*(k+half) + p]: padded to whole
    # rows, row p holds taps p, p+factor, p+2*factor, …
    padded = np.concatenate([taps, np.zeros(factor - 1)])
    return padded.reshape(-1, factor).T.copy()


def upsample(samples: Samples, factor: int) -> Samples:
    """``samples`` at ``factor`` times their rate: ``factor * len(samples)``
    samples, with no delay (output ``factor*i`` sits at input ``i``'s time)."""
    if factor < 1:
        raise ValueError(f"upsampling factor must be at least 1, got {factor}")
    if factor == 1 or len(samples) == 0:
        return samples
    rows = _phases(factor)
    x = samples.astype(np.float64)
    out = np.empty((len(x), factor))
    for p in range(factor):
        # Row p's tap r weighs input i + half - r for output factor*i + p.
        out[:, p] = np.convolve(x, rows[p])[_HALF : _HALF + len(x)]
    result: Samples = np.clip(np.round(out.reshape(-1)), -32768, 32767).astype(np.int16)
    return result

"""What the end-of-turn model hears: Whisper's log-mel features of the last 8 s.

Smart-turn v3 was trained on ``transformers.WhisperFeatureExtractor(chunk_length=8)``'s
features (80 mel bins, 25 ms windows every 10 ms, ``do_normalize=True``) of the
utterance's last 8 s, zeros put *before* a shorter one (as Pipecat does: the end
of speech, what the model judges, always sits at the window's end). This is that
computation in numpy alone (no transformers, no torch; faster-whisper's own is in
the ``local`` extra only): equal to WhisperFeatureExtractor's to float32 rounding
(docs/listening.md, "The end-of-turn model").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

RATE = 16_000
WINDOW_S = 8
WINDOW = RATE * WINDOW_S  # the samples the model hears
_N_FFT = 400  # 25 ms
_HOP = 160  # 10 ms
N_MELS = 80
FRAMES = WINDOW // _HOP  # 800


def _slaney_mel(hz: NDArray[np.float64]) -> NDArray[np.float64]:
    """Slaney's mel scale (librosa's default, Whisper's): linear below 1 kHz, log above."""
    log_step = 27.0 / np.log(6.4)
    return np.where(
        hz < 1000.0, 3.0 * hz / 200.0, 15.0 + np.log(np.maximum(hz, 1e-12) / 1000.0) * log_step
    )


def _slaney_hz(mel: NDArray[np.float64]) -> NDArray[np.float64]:
    log_step = np.log(6.4) / 27.0
    return np.where(mel < 15.0, 200.0 * mel / 3.0, 1000.0 * np.exp(log_step * (mel - 15.0)))


def _mel_filters() -> NDArray[np.float64]:
    """Triangular filters (n_fft/2 + 1 bins x 80), 0 Hz to 8 kHz, each of unit
    area (Slaney's normalisation), as transformers' ``mel_filter_bank`` makes them."""
    edges = _slaney_hz(
        np.linspace(_slaney_mel(np.array(0.0)), _slaney_mel(np.array(RATE / 2)), N_MELS + 2)
    )
    bins = np.linspace(0.0, RATE // 2, _N_FFT // 2 + 1)
    slopes = edges[None, :] - bins[:, None]
    widths = np.diff(edges)
    down = -slopes[:, :-2] / widths[:-1]
    up = slopes[:, 2:] / widths[1:]
    filters = np.maximum(0.0, np.minimum(down, up))
    return filters * (2.0 / (edges[2:] - edges[:-2]))[None, :]


def _sparse(
    filters: NDArray[np.float64],
) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.intp]]:
    """The filters' nonzero weights, grouped by mel bin: the FFT bins, their
    weights, and where each mel bin's group starts."""
    mels, bins = np.nonzero(filters.T)  # sorted by mel bin
    starts = np.searchsorted(mels, np.arange(N_MELS))
    return bins, filters[bins, mels], starts


# The projection onto the mel bins is done sparsely (391 weights, not 80 x 201)
# and without BLAS: numpy's matmul hands it to OpenBLAS, whose threads then
# spin on the other core (~50 ms of CPU after each call, measured), the core
# the recogniser and the voice need.
_BINS, _WEIGHTS, _STARTS = _sparse(_mel_filters())
_HANN = np.hanning(_N_FFT + 1)[:-1]  # periodic, as torch.hann_window


def last_window(samples: NDArray[np.float32]) -> NDArray[np.float32]:
    """The last 8 s of ``samples``, zeros before a shorter input."""
    x = np.asarray(samples, dtype=np.float32).reshape(-1)
    if len(x) >= WINDOW:
        return x[len(x) - WINDOW :]
    return np.concatenate([np.zeros(WINDOW - len(x), dtype=np.float32), x])


def log_mel(samples: NDArray[np.float32]) -> NDArray[np.float32]:
    """The model's input, shape (80, 800), for mono float32 audio at 16 kHz of any length."""
    x = last_window(samples)
    # Zero mean, unit variance over the whole window (padding included), in
    # float32 as transformers does it, before the spectrogram.
    x = (x - x.mean()) / np.sqrt(x.var() + np.float32(1e-7))
    half = _N_FFT // 2
    padded = np.pad(x.astype(np.float64), half, mode="reflect")  # centred frames
    frames = np.lib.stride_tricks.sliding_window_view(padded, _N_FFT)[::_HOP]
    power = np.abs(np.fft.rfft(frames * _HANN, axis=-1)) ** 2  # (801, 201)
    weighted = power.T[_BINS] * _WEIGHTS[:, None]  # (nonzero weights, 801)
    # (the last frame dropped, as transformers does)
    mel = np.log10(np.maximum(np.add.reduceat(weighted, _STARTS, axis=0), 1e-10))[:, :-1]
    mel = np.maximum(mel, mel.max() - 8.0)  # 80 dB of range
    scaled: NDArray[np.float32] = ((mel + 4.0) / 4.0).astype(np.float32)
    return scaled

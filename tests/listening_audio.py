"""Audio for the listening tests: the Piper fixtures in audio_fixtures/listening,
laid out with known silences, plus noise, a cough-like burst and telephone
audio, all made here (no download, no model)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile

from voice_membrane.vocab.audio import Samples, pcm16_from_ulaw, ulaw_from_pcm16

RATE = 16_000
FIXTURES = Path(__file__).parent.parent / "audio_fixtures" / "listening"
_rng = np.random.default_rng(25)


def load(name: str) -> Samples:
    data, rate = soundfile.read(FIXTURES / f"{name}.wav", dtype="int16")
    assert rate == RATE and data.ndim == 1
    return np.asarray(data, dtype=np.int16)


def active_span(samples: Samples) -> tuple[int, int]:
    """First and last sample of the 10 ms frames within 40 dB of the loudest:
    where the speech in a fixture is, by its energy."""
    frame = RATE // 100
    n = len(samples) // frame
    x = samples[: n * frame].astype(np.float64).reshape(n, frame)
    rms = np.sqrt(np.mean(x**2, axis=1))
    active = np.nonzero(rms > rms.max() * 0.01)[0]
    return int(active[0] * frame), int((active[-1] + 1) * frame)


@dataclass
class Layout:
    audio: Samples
    spans: list[tuple[int, int]]  # where speech is, in samples


def layout(*parts: str | float) -> Layout:
    """Fixture names and silences (seconds) in order: the audio and where the
    speech in it is."""
    pieces: list[Samples] = []
    spans: list[tuple[int, int]] = []
    at = 0
    for part in parts:
        if isinstance(part, str):
            piece = load(part)
            start, end = active_span(piece)
            spans.append((at + start, at + end))
        else:
            piece = np.zeros(round(part * RATE), dtype=np.int16)
        pieces.append(piece)
        at += len(piece)
    return Layout(np.concatenate(pieces), spans)


def dbfs(x: Samples) -> float:
    return float(20 * np.log10(np.sqrt(np.mean(x.astype(np.float64) ** 2)) / 32768))


def at_level(x: Samples | np.ndarray, level: float) -> Samples:
    """``x`` scaled to an RMS of ``level`` dBFS."""
    x = np.asarray(x, dtype=np.float64)
    gain = 10 ** ((level - 20 * np.log10(np.sqrt(np.mean(x**2)) / 32768)) / 20)
    return np.clip(np.round(x * gain), -32768, 32767).astype(np.int16)


def white_noise(seconds: float, level: float) -> Samples:
    return at_level(_rng.standard_normal(round(seconds * RATE)), level)


def pink_noise(seconds: float, level: float) -> Samples:
    n = round(seconds * RATE)
    spectrum = np.fft.rfft(_rng.standard_normal(n))
    f = np.fft.rfftfreq(n)
    spectrum[1:] /= np.sqrt(f[1:])
    spectrum[0] = 0
    return at_level(np.fft.irfft(spectrum, n), level)


def cough(level: float, seconds: float = 0.3) -> Samples:
    """A cough-like burst: band-limited noise (300-3000 Hz), a 10 ms attack and
    an 80 ms decay."""
    n = round(seconds * RATE)
    t = np.arange(n) / RATE
    spectrum = np.fft.rfft(_rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1 / RATE)
    spectrum[(f < 300) | (f > 3000)] = 0
    envelope = np.exp(-t / 0.08) * (1 - np.exp(-t / 0.01))
    return at_level(np.fft.irfft(spectrum, n) * envelope, level)


def telephone(samples: Samples) -> Samples:
    """16 kHz audio as a phone line carries it: low-passed below 3.4 kHz
    (windowed sinc), decimated to 8 kHz, through G.711 μ-law and back."""
    taps = np.arange(-64, 65)
    h = np.sinc(2 * 3400 / RATE * taps) * np.hamming(len(taps))
    h /= h.sum()
    filtered = np.convolve(samples.astype(np.float64), h, mode="same")[::2]
    pcm = np.clip(np.round(filtered), -32768, 32767).astype(np.int16)
    return pcm16_from_ulaw(ulaw_from_pcm16(pcm))

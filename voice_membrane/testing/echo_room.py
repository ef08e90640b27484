"""A room for echo tests: the assistant's audio heard back through a laptop's
speaker and microphone (a gain, a delay, a little reverb), and a user who
speaks over it. Made here, deterministic (a seeded generator)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf  # type: ignore[import-untyped]

from ..vocab.audio import Samples

RATE = 16_000
USER = Path(__file__).resolve().parents[2] / "audio_fixtures" / "real" / "read" / "go_forward.flac"


def room_reverb(rt60_s: float = 0.25, seed: int = 44) -> np.ndarray:
    """A small room's impulse response: the direct sound, then a noise tail
    decaying 60 dB in ``rt60_s`` (normalised to the direct sound's energy)."""
    n = round(rt60_s * RATE)
    rng = np.random.default_rng(seed)
    tail = rng.standard_normal(n) * np.exp(-6.9 * np.arange(n) / n) * 0.3
    tail[:40] = 0.0  # the first reflection 2.5 ms after the direct sound
    tail[0] = 1.0
    return np.asarray(tail / np.sqrt(np.sum(tail**2)), dtype=np.float64)


def echo_path(
    played: Samples, gain_db: float, delay_ms: float, reverb: np.ndarray | None = None
) -> Samples:
    """What the microphone hears of ``played``: ``gain_db`` quieter (its RMS),
    ``delay_ms`` later, through ``reverb`` if given; as long as ``played``."""
    x = played.astype(np.float64)
    if reverb is not None:
        x = np.convolve(x, reverb)[: len(played)]
    delay = round(delay_ms * RATE / 1000)
    x = np.concatenate([np.zeros(delay), x[: len(x) - delay]]) * 10 ** (gain_db / 20)
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


def user_voice(level_db: float, like: Samples, path: Path = USER) -> Samples:
    """A real person's speech at ``level_db`` relative to ``like``'s level (RMS
    over their voiced 10 ms frames: pauses do not count)."""
    data, rate = sf.read(path, dtype="int16")
    assert rate == RATE
    voice = np.asarray(data, dtype=np.float64)
    gain = 10 ** (level_db / 20) * _voiced_rms(like) / _voiced_rms(voice)
    return np.clip(np.round(voice * gain), -32768, 32767).astype(np.int16)


def speech_onset(voice: Samples) -> int:
    """The first sample of the first 10 ms frame within 25 dB of the loudest:
    where the words begin (the recording's room noise before them is not speech)."""
    frames = voice[: len(voice) // 160 * 160].astype(np.float64).reshape(-1, 160)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    return int(np.argmax(rms > rms.max() * 10 ** (-25 / 20))) * 160


def mix(base: Samples, voice: Samples, at: int) -> Samples:
    """``voice`` added into ``base`` from sample ``at`` (cut at its end)."""
    out = base.astype(np.int32)
    piece = voice[: max(0, len(out) - at)]
    out[at : at + len(piece)] += piece
    return np.clip(out, -32768, 32767).astype(np.int16)


def _voiced_rms(x: np.ndarray) -> float:
    frames = x[: len(x) // 160 * 160].astype(np.float64).reshape(-1, 160)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    return float(np.sqrt(np.mean(rms[rms > rms.max() * 0.05] ** 2)))


class PlayedEcho:
    """The echo of what a phone plays, for a fake caller's microphone: pieces
    of audio played from known times (cut short by a ``clear``), heard back
    ``gain_db`` quieter and ``delay_s`` later."""

    def __init__(self, gain_db: float, delay_s: float, rate: int) -> None:
        self.gain, self.delay_s, self.rate = 10 ** (gain_db / 20), delay_s, rate
        self._pieces: list[tuple[float, Samples]] = []  # (when it starts playing, audio)

    def played(self, starts: float, samples: Samples) -> None:
        self._pieces.append((starts, samples))

    def cleared(self, at: float) -> None:
        """What had not played by ``at`` never will."""
        kept = []
        for starts, samples in self._pieces:
            playable = max(0, min(len(samples), int((at - starts) * self.rate)))
            if playable:
                kept.append((starts, samples[:playable]))
        self._pieces = kept

    def into(self, samples: Samples, ends: float) -> Samples:
        """``samples`` captured up to ``ends``, with the echo in them."""
        return mix(samples, self.heard(ends, len(samples)), 0)

    def heard(self, ends: float, n: int) -> Samples:
        """The echo in the ``n`` samples a microphone captured up to ``ends``."""
        t0 = ends - self.delay_s - n / self.rate
        out = np.zeros(n, dtype=np.float64)
        while self._pieces and self._pieces[0][0] + len(self._pieces[0][1]) / self.rate < t0:
            self._pieces.pop(0)  # (played out before this frame: never heard again)
        for starts, samples in self._pieces:
            lo = round((starts - t0) * self.rate)
            if lo >= n:
                break
            a, b = max(0, lo), min(n, lo + len(samples))
            if a < b:
                out[a:b] += samples[a - lo : b - lo] * self.gain
        return np.clip(np.round(out), -32768, 32767).astype(np.int16)

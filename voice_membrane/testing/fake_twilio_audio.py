"""What the fake Twilio caller says and hears, as a phone line carries it:
a WAV fixture or samples as 20 ms μ-law 8 kHz frames, and received audio joined."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from ..sources._resample import StreamResampler, to_int16
from ..vocab.audio import Samples, ulaw_from_pcm16

RATE = 8000
FRAME = 160  # 20 ms of μ-law 8 kHz
FRAME_S = FRAME / RATE
SILENCE = b"\xff" * FRAME  # μ-law for 0


def load_audio(audio: str | Path | Samples, sample_rate: int) -> tuple[Samples, int]:
    """``audio`` (a 16-bit mono WAV file, or samples at ``sample_rate``) and its rate."""
    if isinstance(audio, str | Path):
        with wave.open(str(audio), "rb") as wav:
            if wav.getsampwidth() != 2 or wav.getnchannels() != 1:
                raise ValueError(f"{audio}: the fake caller plays 16-bit mono WAV files")
            rate = wav.getframerate()
            data = wav.readframes(wav.getnframes())
        return np.frombuffer(data, dtype="<i2").astype(np.int16), rate
    return audio, sample_rate


def mulaw_frames(samples: Samples, rate: int) -> tuple[list[bytes], int]:
    """``samples`` at ``rate`` as 20 ms μ-law 8 kHz frames (a phone line's
    band-limited resampling; the last frame padded with silence), and how many
    samples of that padding."""
    if rate != RATE:
        resampler = StreamResampler(rate, RATE)
        converted = np.concatenate([resampler.feed(samples.astype(np.float64)), resampler.flush()])
        samples = to_int16(converted)
    ulaw = ulaw_from_pcm16(samples)
    padding = (-len(ulaw)) % FRAME
    ulaw += SILENCE[:padding]
    return [ulaw[i : i + FRAME] for i in range(0, len(ulaw), FRAME)], padding


def join_samples(parts: list[Samples]) -> Samples:
    """The parts end to end (none: no samples)."""
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)

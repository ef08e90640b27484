"""Regenerate the listening fixtures: the bundled Piper voice (joe, medium)
saying each ``*.txt`` beside this file, resampled to 16 kHz mono int16, with
the voice's leading and trailing silence cut to 20 ms so the speech span of
each file is known (tests insert their own silences around it).

    PYTHONPATH=. .venv/bin/python audio_fixtures/listening/make_fixtures.py
"""

from __future__ import annotations

from pathlib import Path

import anyio
import numpy as np
import soundfile

from voice_membrane.tts.piper import PiperEngine
from voice_membrane.vocab.audio import resample

HERE = Path(__file__).parent
RATE = 16_000


def _trim(samples: np.ndarray, rate: int) -> np.ndarray:
    frame = rate // 100
    n = len(samples) // frame
    rms = np.sqrt(np.mean(samples[: n * frame].astype(np.float64).reshape(n, frame) ** 2, axis=1))
    active = np.nonzero(rms > rms.max() * 0.01)[0]  # within 40 dB of the loudest 10 ms
    pad = 2 * frame
    start = max(0, active[0] * frame - pad)
    end = min(len(samples), (active[-1] + 1) * frame + pad)
    return samples[start:end]


async def main() -> None:
    engine = PiperEngine()
    await engine.start()
    for text_file in sorted(HERE.glob("*.txt")):
        text = text_file.read_text().strip()
        pieces = [chunk.samples async for chunk in engine.synthesize(text)]
        audio = resample(np.concatenate(pieces), engine.sample_rate, RATE)
        soundfile.write(text_file.with_suffix(".wav"), _trim(audio, RATE), RATE, subtype="PCM_16")
    await engine.aclose()


if __name__ == "__main__":
    anyio.run(main)

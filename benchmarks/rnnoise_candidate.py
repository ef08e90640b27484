"""RNNoise (``pyrnnoise``'s librnnoise) tried in front of the detector for
issue 44 and not shipped (docs/listening.md, "Noise suppression"): does it cut
the detector's false starts in noise?

Not part of ``make bench``: pyrnnoise is not installed by the setup (its wheel
declares audiolab, matplotlib, click and tqdm; only its ctypes library is used
here). To rerun::

    pip install --no-deps --target /tmp/aec-rnn pyrnnoise
    python -m benchmarks.rnnoise_candidate /tmp/aec-rnn/pyrnnoise/librnnoise.so

Silero's speech starts on 10 s of pink and white noise (-35, -20, -6 dBFS), ten
coughs, and babble (six real read recordings summed and reversed, so no word is
a word) at -35 and -25 dBFS, as heard and through RNNoise (at 48 kHz, its own
rate); and where the starts of two utterances in pink noise (SNR 10 and 0 dB)
are found. CPU per second of audio.
"""

from __future__ import annotations

import ctypes
import sys
import time
from pathlib import Path

import numpy as np
import soundfile as sf  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from listening_audio import at_level, cough, layout, pink_noise, white_noise

from voice_membrane.listening.engines import make_vad
from voice_membrane.listening.settings import VadSettings
from voice_membrane.listening.vad import SpeechStart
from voice_membrane.vocab.audio import Samples, resample

RATE = 16_000
READ = Path(__file__).resolve().parent.parent / "audio_fixtures" / "real" / "read"


class RnNoise:
    def __init__(self, library: str) -> None:
        lib = ctypes.CDLL(library)
        lib.rnnoise_create.restype = ctypes.c_void_p
        lib.rnnoise_create.argtypes = [ctypes.c_void_p]
        pointer = ctypes.POINTER(ctypes.c_float)
        lib.rnnoise_process_frame.argtypes = [ctypes.c_void_p, pointer, pointer]
        lib.rnnoise_process_frame.restype = ctypes.c_float
        self.lib = lib

    def __call__(self, samples: Samples) -> tuple[Samples, float]:
        """``samples`` denoised, and the CPU seconds per second of audio."""
        state = self.lib.rnnoise_create(None)
        x = resample(samples, RATE, 48_000).astype(np.float32)
        out = np.zeros_like(x)
        pointer = ctypes.POINTER(ctypes.c_float)
        cpu = time.process_time()
        for i in range(0, len(x) - 479, 480):
            frame, done = np.ascontiguousarray(x[i : i + 480]), np.zeros(480, np.float32)
            self.lib.rnnoise_process_frame(
                state, done.ctypes.data_as(pointer), frame.ctypes.data_as(pointer)
            )
            out[i : i + 480] = done
        cpu = (time.process_time() - cpu) / (len(samples) / RATE)
        cleaned = np.clip(out, -32768, 32767).astype(np.int16)
        return resample(cleaned, 48_000, RATE), cpu


def starts(samples: Samples) -> list[float]:
    vad = make_vad(VadSettings(already_talking="user"), RATE)
    events = [e for i in range(0, len(samples), 320) for e in vad.feed(samples[i : i + 320])]
    return [round(e.at_sample / RATE, 3) for e in events if isinstance(e, SpeechStart)]


def main(library: str) -> None:
    denoise = RnNoise(library)
    cases: dict[str, Samples] = {}
    for level in (-35, -20, -6):
        cases[f"pink {level} dBFS"] = pink_noise(10, level)
        cases[f"white {level} dBFS"] = white_noise(10, level)
    gap = np.zeros(RATE // 2, dtype=np.int16)
    cases["10 coughs -15 dBFS"] = np.concatenate([np.concatenate([cough(-15), gap])] * 10)
    clips = [sf.read(p, dtype="int16")[0] for p in sorted(READ.glob("*.flac"))[:6]]
    babble = sum(np.resize(c, 10 * RATE)[::-1].astype(np.float64) for c in clips)
    for level in (-35, -25):
        cases[f"babble {level} dBFS"] = at_level(np.asarray(babble), level)
    print("| noise (10 s) | starts as heard | starts through RNNoise | RNNoise CPU ms/s |")
    print("| --- | --- | --- | --- |")
    for name, samples in cases.items():
        cleaned, cpu = denoise(samples)
        print(f"| {name} | {len(starts(samples))} | {len(starts(cleaned))} | {cpu * 1000:.0f} |")
    speech = layout(1.0, "weather", 1.0, "number_start", 1.0).audio
    for snr in (10, 0):
        noise = pink_noise(len(speech) / RATE, -26 - snr)
        noisy = np.clip(speech.astype(np.int32) + noise, -32768, 32767).astype(np.int16)
        print(
            f"speech in pink noise, SNR {snr} dB: starts at {starts(noisy)} s as heard, "
            f"{starts(denoise(noisy)[0])} s through RNNoise"
        )


if __name__ == "__main__":
    main(sys.argv[1])

"""The benchmarks' speech bounds: where the detector's own gate hears sound."""

import numpy as np
import pytest

from voice_membrane.bench.voiced import voiced_bounds


def tone(seconds: float, dbfs: float, rate: int = 16_000) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    amplitude = 32768 * 10 ** (dbfs / 20) * np.sqrt(2)  # an RMS of ``dbfs``
    return (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.int16)


def test_a_fading_tail_above_the_gate_is_speech_and_a_noise_floor_under_it_is_not() -> None:
    floor = lambda s: tone(s, -60.0)  # noqa: E731 - a room's hum, under the -50 dBFS gate
    clip = np.concatenate([floor(0.1), tone(0.3, -20.0), tone(0.05, -45.0), floor(0.2)])
    first, last = voiced_bounds(clip, 16_000)
    assert first == 1600  # where the word starts (a 5 ms block boundary)
    assert last == 1600 + 4800 + 800 - 1  # the -45 dBFS tail is still speech


def test_a_clip_with_nothing_above_the_gate_is_refused() -> None:
    with pytest.raises(ValueError, match="-50 dBFS"):
        voiced_bounds(tone(0.2, -60.0), 16_000)

"""The benchmarks' speech bounds: where the detector's own gate hears sound."""

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from voice_membrane.bench.voiced import captured_at, voiced_bounds
from voice_membrane.listening.silero import SileroVad
from voice_membrane.listening.vad import SpeechEnd

QUESTION = Path(__file__).resolve().parent.parent / "audio_fixtures" / "listening" / "weather.wav"


def tone(seconds: float, dbfs: float, rate: int = 16_000) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    amplitude = 32768 * 10 ** (dbfs / 20) * np.sqrt(2)  # an RMS of ``dbfs``
    return (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.int16)


def test_a_fading_tail_above_the_gate_is_speech_and_a_noise_floor_under_it_is_not() -> None:
    floor = lambda s: tone(s, -60.0)  # noqa: E731 - a room's hum, under the -50 dBFS gate
    clip = np.concatenate([floor(0.1), tone(0.3, -20.0), tone(0.05, -45.0), floor(0.2)])
    first, last = voiced_bounds(clip, 16_000)
    assert first == 1600  # where the word starts (a 4 ms block boundary)
    # the -45 dBFS tail is still speech, to the end of the block it ends in (its
    # 50 ms are 12.5 blocks; with the floor after it the block is over the gate)
    assert last == 1600 + 4800 + 13 * 64 - 1


def test_a_clip_with_nothing_above_the_gate_is_refused() -> None:
    with pytest.raises(ValueError, match="-50 dBFS"):
        voiced_bounds(tone(0.2, -60.0), 16_000)


def test_the_voiced_end_is_where_the_detectors_end_silence_starts() -> None:
    # The bench's question after silence, starting at a 20 ms frame's start as
    # a caller says it: the stopwatch's mark is the detector's own speech end.
    rate = 16_000
    question, source_rate = sf.read(QUESTION, dtype="int16")
    assert source_rate == rate
    lead = 25 * 320  # half a second of frames
    audio = np.concatenate([np.zeros(lead, np.int16), question, np.zeros(rate, np.int16)])
    vad, events = SileroVad(sample_rate=rate), []
    for at in range(0, len(audio), 320):
        events += vad.feed(audio[at : at + 320])
    (end,) = [e for e in events if isinstance(e, SpeechEnd)]
    assert end.at_sample == lead + voiced_bounds(question, rate)[1] + 1


def test_a_sample_is_dated_when_a_microphone_captured_it() -> None:
    # a 20 ms frame (samples 320 to 640) went out at 10.0 s, once its last sample was in
    assert captured_at(10.0, 640, 640, 16_000) == 10.0
    assert captured_at(10.0, 640, 320, 16_000) == pytest.approx(9.98)
    assert captured_at(10.0, 640, 400, 16_000) == pytest.approx(9.985)
    with pytest.raises(ValueError, match="after the frame's end"):
        captured_at(10.0, 640, 641, 16_000)

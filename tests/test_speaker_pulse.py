"""SpeakerSink through a real audio server: a private PulseAudio with a null sink.

What the sink plays is recorded from the sink's monitor and checked with numpy:
the tone is there, at its frequency and length; drain() waits for real time;
stop() silences the output promptly and played_seconds agrees with the recording;
first_played_ns is when the device's callback took the first sample.
Timing assertions are lower bounds or generous upper bounds, never speed targets.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import numpy as np
import pytest
import soundfile as sf

from voice_membrane.sinks.speaker import SpeakerSink, speaker_available
from voice_membrane.testing.pulse import PulseServer
from voice_membrane.vocab.audio import AudioChunk, Samples

RATE = 22050
TONE_HZ = 440.0
WINDOW = RATE // 100  # 10 ms analysis windows
BACKENDS = [
    "sounddevice",
    pytest.param(
        "pyaudio",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("pyaudio") is None, reason="pyaudio is not installed"
        ),
    ),
]


def tone(seconds: float) -> Samples:
    t = np.arange(round(seconds * RATE)) / RATE
    return np.round(0.5 * 32767 * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.int16)


def chunks(samples: Samples, seconds: float = 0.1) -> Iterator[AudioChunk]:
    step = round(seconds * RATE)
    for start in range(0, len(samples), step):
        yield AudioChunk(samples[start : start + step], RATE)


def audible_span(path: Path) -> tuple[float, float, Samples]:
    """(start, end) in seconds of the recording's non-silent part, and its samples."""
    samples, rate = sf.read(path, dtype="int16")
    assert rate == RATE
    usable = len(samples) // WINDOW * WINDOW
    frames = samples[:usable].reshape(-1, WINDOW).astype(np.float64)
    rms = np.sqrt((frames**2).mean(axis=1))
    loud = np.flatnonzero(rms > 1000)  # the tone's RMS is ~11600; silence is 0
    assert len(loud), "the recording is silent"
    start, end = loud[0] * WINDOW, (loud[-1] + 1) * WINDOW
    return start / RATE, end / RATE, samples[start:end]


def loud_seconds(path: Path) -> float:
    """How much of the recording is the tone (windows above the silence floor)."""
    samples, rate = sf.read(path, dtype="int16")
    usable = len(samples) // WINDOW * WINDOW
    frames = samples[:usable].reshape(-1, WINDOW).astype(np.float64)
    rms = np.sqrt((frames**2).mean(axis=1))
    return float(np.count_nonzero(rms > 1000) * WINDOW / rate)


def dominant_hz(samples: Samples) -> float:
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64) * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / RATE)[np.argmax(spectrum)])


def test_the_private_server_is_the_default_output(pulse: PulseServer) -> None:
    assert speaker_available("sounddevice") is None
    assert pulse.count("sinks") == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_plays_a_tone_and_drain_waits_until_it_was_heard(
    pulse: PulseServer, backend: str, tmp_path: Path
) -> None:
    path = tmp_path / "heard.wav"
    audio = tone(1.5)

    async def play() -> tuple[float, float]:
        sink = SpeakerSink(backend=backend, sample_rate=RATE)  # type: ignore[arg-type]
        await sink.open()
        try:
            started = time.monotonic()
            for chunk in chunks(audio):
                await sink.write(chunk)
            await sink.drain()
            return time.monotonic() - started, sink.played_seconds
        finally:
            await sink.aclose()

    with pulse.record(path) as recording:
        elapsed, played = anyio.run(play)
        time.sleep(0.3)  # let the recorder take the tail
        recording.stop()

    start, end, heard = audible_span(path)
    assert elapsed >= 1.2, f"drain returned after {elapsed:.2f} s of 1.5 s of audio"
    assert played == pytest.approx(1.5, abs=0.02)
    # All of the tone was heard, once; on a loaded machine the sound server may
    # leave a gap in it (the span then stretches, the tone heard does not).
    assert loud_seconds(path) == pytest.approx(1.5, abs=0.1)
    assert 1.35 <= end - start <= 2.0
    assert dominant_hz(heard) == pytest.approx(TONE_HZ, abs=5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stop_silences_within_200_ms_and_played_seconds_matches(
    pulse: PulseServer, backend: str, tmp_path: Path
) -> None:
    path = tmp_path / "stopped.wav"
    audio = tone(4.0)  # far more than is played before the stop

    async def play_then_stop() -> tuple[float, float, float]:
        sink = SpeakerSink(backend=backend, sample_rate=RATE)  # type: ignore[arg-type]
        await sink.open()
        try:
            started = time.monotonic()
            async with anyio.create_task_group() as tg:

                async def produce() -> None:
                    for chunk in chunks(audio):
                        await sink.write(chunk)  # blocks: the buffer holds 0.5 s

                tg.start_soon(produce)
                await anyio.sleep(1.0)
                tg.cancel_scope.cancel()  # an interruption cancels the producer first
            stop_at = time.monotonic() - started
            await sink.stop()
            played = sink.played_seconds
            await anyio.sleep(0.3)
            assert sink.played_seconds == played, "audio kept playing after stop()"
            return stop_at, played, time.monotonic() - started - stop_at
        finally:
            await sink.aclose()

    with pulse.record(path) as recording:
        stop_at, played, _ = anyio.run(play_then_stop)
        time.sleep(0.3)
        recording.stop()

    start, end, heard = audible_span(path)
    duration = end - start
    # The recording's onset is the first write (plus the output latency) and its
    # end is the stop (plus the same latency), so its length bounds stop's latency.
    assert duration <= stop_at + 0.2, f"heard {duration:.3f} s, stopped at {stop_at:.3f} s"
    assert duration >= stop_at - 0.2, f"heard {duration:.3f} s, stopped at {stop_at:.3f} s"
    # What was heard, not the span: under load the callback can be starved and
    # the server fill the wait with silence, which played_seconds rightly leaves out.
    assert played == pytest.approx(loud_seconds(path), abs=0.1)
    assert dominant_hz(heard) == pytest.approx(TONE_HZ, abs=5)


def test_pause_silences_the_tone_and_resume_plays_the_rest_once(
    pulse: PulseServer, tmp_path: Path
) -> None:
    path = tmp_path / "paused.wav"

    async def play_pause_resume() -> tuple[float, float, float]:
        sink = SpeakerSink(sample_rate=RATE)
        await sink.open()
        try:
            async with anyio.create_task_group() as tg:

                async def produce() -> None:
                    for chunk in chunks(tone(1.2)):
                        await sink.write(chunk)
                    await sink.drain()

                tg.start_soon(produce)
                await anyio.sleep(0.4)
                sink.pause()
                await anyio.sleep(0.1)  # the device's latency plays out
                held = sink.played_seconds
                await anyio.sleep(0.6)
                still = sink.played_seconds
                sink.resume()
            return held, still, sink.played_seconds
        finally:
            await sink.aclose()

    with pulse.record(path) as recording:
        held, still, played = anyio.run(play_pause_resume)
        time.sleep(0.3)
        recording.stop()

    assert still == held  # nothing was heard while paused
    assert played == pytest.approx(1.2, abs=0.02)
    # all of the tone was heard once, with a silence of about the pause inside it
    assert loud_seconds(path) == pytest.approx(1.2, abs=0.1)
    start, end, _ = audible_span(path)
    assert end - start >= 1.2 + 0.4


def test_a_turn_after_a_stop_plays_normally(pulse: PulseServer, tmp_path: Path) -> None:
    path = tmp_path / "two_turns.wav"

    async def two_turns() -> float:
        sink = SpeakerSink(sample_rate=RATE)
        await sink.open()
        try:
            await sink.write(AudioChunk(tone(0.3), RATE))
            await sink.stop()  # mid-play: the rest of the 0.3 s is discarded
            first = sink.played_seconds
            await sink.write(AudioChunk(tone(0.4), RATE))
            await sink.drain()
            return sink.played_seconds - first
        finally:
            await sink.aclose()

    with pulse.record(path) as recording:
        second = anyio.run(two_turns)
        time.sleep(0.3)
        recording.stop()

    assert second == pytest.approx(0.4, abs=0.02)
    _, end, _ = audible_span(path)
    assert end > 0.35  # the second turn was heard


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_played_is_when_the_callback_took_the_audio_not_when_write_returned(
    pulse: PulseServer, backend: str
) -> None:
    async def one_long_write() -> tuple[int, int | None, int]:
        sink = SpeakerSink(backend=backend, sample_rate=RATE)  # type: ignore[arg-type]
        await sink.open()
        try:
            called = time.perf_counter_ns()
            # 1.5 s into the 0.5 s buffer: write returns once its last second fits.
            await sink.write(AudioChunk(tone(1.5), RATE))
            returned = time.perf_counter_ns()
            first = sink.first_played_ns
            await sink.drain()
            return called, first, returned
        finally:
            await sink.aclose()

    called, first, returned = anyio.run(one_long_write)
    assert first is not None and called < first
    # The device took the first sample about a second before the write returned;
    # half of that is a bound no scheduling delay comes near.
    assert first < returned - 500_000_000

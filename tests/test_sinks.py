"""The WAV, null and speaker sinks, without any audio device (see test_speaker_pulse for one)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import numpy as np
import pytest
import soundfile as sf

from tests.manual_device import ManualDevice
from voice_membrane.sinks import speaker as speaker_module
from voice_membrane.sinks._ring import PlaybackBuffer
from voice_membrane.sinks.base import AudioSink, SinkError
from voice_membrane.sinks.null import NullSink
from voice_membrane.sinks.registry import create_sink
from voice_membrane.sinks.speaker import BLOCK_SECONDS, SpeakerSink, speaker_available
from voice_membrane.sinks.wav import WavSink
from voice_membrane.vocab.audio import AudioChunk, Samples

NO_DEVICE = "no audio output device (PortAudio found none)"


def ramp(n: int) -> Samples:
    return (np.arange(n) % 2000 - 1000).astype(np.int16)


def sine(hz: float, seconds: float, rate: int) -> Samples:
    t = np.arange(round(seconds * rate)) / rate
    return np.round(16000 * np.sin(2 * np.pi * hz * t)).astype(np.int16)


def run(sink: AudioSink, *turns: list[AudioChunk]) -> None:
    """Play each turn (open, writes + drain per turn, close) on a fresh event loop."""

    async def session() -> None:
        await sink.open()
        for chunks in turns:
            for chunk in chunks:
                await sink.write(chunk)
            await sink.drain()
        await sink.aclose()

    anyio.run(session)


# --- WAV ---------------------------------------------------------------------------


def test_wav_adopts_the_first_chunks_rate_and_resamples_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "out.wav"
    sink = WavSink(path)
    assert sink.sample_rate == 0  # unknown until the first chunk
    first = ramp(1600)
    run(sink, [AudioChunk(first, 16000), AudioChunk(ramp(800), 8000)])

    data, rate = sf.read(path, dtype="int16")
    info = sf.info(path)
    assert (rate, info.channels, info.subtype) == (16000, 1, "PCM_16")
    assert sink.sample_rate == 16000
    assert len(data) == 1600 + 1600  # 800 samples at 8 kHz became 1600 at 16 kHz
    assert np.array_equal(data[:1600], first)
    assert sink.played_seconds == pytest.approx(0.2)


def test_wav_with_a_fixed_rate_resamples_and_keeps_the_pitch(tmp_path: Path) -> None:
    path = tmp_path / "out.wav"
    run(WavSink(path, sample_rate=24000), [AudioChunk(sine(440, 1.0, 22050), 22050)])

    data, rate = sf.read(path, dtype="int16")
    assert rate == 24000 and len(data) == 24000
    spectrum = np.abs(np.fft.rfft(data.astype(np.float64)))
    assert np.fft.rfftfreq(len(data), 1 / rate)[np.argmax(spectrum)] == pytest.approx(440, abs=2)


def test_wav_turns_follow_one_another_in_one_file(tmp_path: Path) -> None:
    path = tmp_path / "turns.wav"
    a, b, c = ramp(500), ramp(700) // 2, ramp(300) // 3
    sink = WavSink(path, sample_rate=16000)

    async def session() -> None:
        await sink.open()
        await sink.write(AudioChunk(a, 16000))
        await sink.drain()
        await sink.write(AudioChunk(b, 16000))
        await sink.stop()  # an interrupted turn: what was written stays written
        await sink.write(AudioChunk(c, 16000))
        await sink.drain()
        await sink.aclose()

    anyio.run(session)
    data, _ = sf.read(path, dtype="int16")
    assert np.array_equal(data, np.concatenate([a, b, c]))
    assert sink.played_seconds == pytest.approx(1500 / 16000)


def test_wav_session_without_audio_leaves_a_valid_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.wav"
    run(WavSink(path))
    assert sf.info(path).frames == 0


def test_wav_bad_path_names_the_path_and_the_os_error(tmp_path: Path) -> None:
    path = tmp_path / "missing-dir" / "out.wav"
    with pytest.raises(SinkError) as err:
        anyio.run(WavSink(path).open)
    assert str(path) in str(err.value)
    assert "No such file or directory" in str(err.value)


def test_wav_write_before_open_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SinkError, match="not open"):
        anyio.run(WavSink(tmp_path / "x.wav").write, AudioChunk(ramp(10), 16000))


# --- null --------------------------------------------------------------------------


def test_null_sink_counts_without_waiting() -> None:
    sink = NullSink()
    started = time.monotonic()
    run(sink, [AudioChunk(ramp(24000), 24000)] * 10)
    assert sink.played_seconds == pytest.approx(10.0)
    assert time.monotonic() - started < 5  # not real time (10 s of audio)


def test_null_sink_in_real_time_takes_at_least_as_long_as_the_audio() -> None:
    sink = NullSink(sample_rate=16000, realtime=True)
    started = time.monotonic()
    run(sink, [AudioChunk(ramp(1600), 16000)] * 3)  # 0.3 s in three writes
    assert time.monotonic() - started >= 0.29  # a lower bound (minus timer slack) only
    assert sink.played_seconds == pytest.approx(0.3)


def test_null_sink_in_real_time_stop_discards_the_unplayed_rest() -> None:
    sink = NullSink(sample_rate=16000, realtime=True)

    async def interrupted() -> tuple[float, float]:
        await sink.open()
        with anyio.move_on_after(0.1):
            await sink.write(AudioChunk(ramp(16000), 16000))  # 1 s
        await sink.stop()
        played = sink.played_seconds
        await anyio.sleep(0.05)
        return played, sink.played_seconds

    played, later = anyio.run(interrupted)
    # The 0.1 s did pass (minus timer slack), less the wait for the clock's block.
    assert 0.09 - BLOCK_SECONDS <= played < 1.0
    assert later == played  # nothing more plays after stop


def test_null_sink_first_played_is_the_utterances_first_write() -> None:
    sink = NullSink(sample_rate=16000)

    async def two_utterances() -> None:
        await sink.open()
        assert sink.first_played_ns is None
        before = time.perf_counter_ns()
        await sink.write(AudioChunk(ramp(160), 16000))
        first = sink.first_played_ns
        assert first is not None and before <= first <= time.perf_counter_ns()
        await sink.write(AudioChunk(ramp(160), 16000))
        await sink.drain()
        assert sink.first_played_ns == first  # kept until the next utterance
        later = time.perf_counter_ns()
        await sink.write(AudioChunk(ramp(160), 16000))
        second = sink.first_played_ns
        assert second is not None and second >= later

    anyio.run(two_utterances)


def test_null_sink_in_real_time_buffers_like_a_speaker() -> None:
    sink = NullSink(sample_rate=16000, realtime=True)  # a 0.5 s buffer, as the speaker's

    async def one_long_write() -> tuple[int, int | None, int, float]:
        await sink.open()
        called = time.perf_counter_ns()
        await sink.write(AudioChunk(ramp(16000), 16000))  # 1 s
        return called, sink.first_played_ns, time.perf_counter_ns(), sink.played_seconds

    called, first, returned, played = anyio.run(one_long_write)
    # Playing started at the clock's next block after the call, while write waited…
    assert first is not None and called <= first < returned
    # …and the write returned once its end fitted in the buffer, not once all had played.
    assert 0.45 <= played < 1.0


def test_null_sink_in_real_time_pause_holds_the_audio_and_resume_plays_it_all() -> None:
    sink = NullSink(sample_rate=16000, realtime=True)

    async def paused_midway() -> tuple[float, float, bool, float, float]:
        await sink.open()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sink.write, AudioChunk(ramp(16000), 16000))  # 1 s
            await anyio.sleep(0.2)
            assert sink.pause() is True
            held = sink.played_seconds
            drained = False
            with anyio.move_on_after(0.3):
                await sink.drain()  # waits while paused
                drained = True
            still = sink.played_seconds
            started = time.monotonic()
            sink.resume()
        await sink.drain()
        return held, still, drained, sink.played_seconds, time.monotonic() - started

    held, still, drained, played, rest = anyio.run(paused_midway)
    assert 0.1 <= held < 0.5
    assert still == held  # nothing played while paused
    assert not drained
    assert played == pytest.approx(1.0)  # all of it, once
    assert rest >= 1.0 - held - 0.05  # the held rest played in real time after resume


def test_stop_ends_a_pause_and_the_next_turn_plays() -> None:
    sink = NullSink(sample_rate=16000, realtime=True)

    async def stop_while_paused() -> tuple[float, float]:
        await sink.open()
        with anyio.move_on_after(0.1):
            await sink.write(AudioChunk(ramp(16000), 16000))
        sink.pause()
        await sink.stop()  # the held audio is discarded
        first = sink.played_seconds
        await sink.write(AudioChunk(ramp(1600), 16000))
        with anyio.fail_after(5):
            await sink.drain()
        return first, sink.played_seconds - first

    first, second = anyio.run(stop_while_paused)
    assert first < 0.5
    assert second == pytest.approx(0.1)


def test_sinks_that_are_not_real_time_cannot_pause(tmp_path: Path) -> None:
    assert NullSink().pause() is False
    assert WavSink(tmp_path / "x.wav").pause() is False


# --- WAV: first audio ---------------------------------------------------------------


def test_wav_first_played_is_when_the_utterance_was_first_written(tmp_path: Path) -> None:
    sink = WavSink(tmp_path / "first.wav")

    async def two_utterances() -> None:
        await sink.open()
        before = time.perf_counter_ns()
        await sink.write(AudioChunk(ramp(160), 16000))
        first = sink.first_played_ns
        assert first is not None and first >= before
        await sink.write(AudioChunk(ramp(160), 16000))
        await sink.stop()
        assert sink.first_played_ns == first
        later = time.perf_counter_ns()
        await sink.write(AudioChunk(ramp(160), 16000))
        second = sink.first_played_ns
        assert second is not None and second >= later
        await sink.aclose()

    anyio.run(two_utterances)


# --- registry ----------------------------------------------------------------------


def test_registry_creates_each_kind(tmp_path: Path) -> None:
    assert isinstance(create_sink("wav", path=tmp_path / "a.wav"), WavSink)
    assert isinstance(create_sink("null", realtime=True), NullSink)
    speaker = create_sink("speaker", backend="pyaudio", sample_rate=16000, device="pulse")
    assert isinstance(speaker, SpeakerSink) and speaker.sample_rate == 16000


def test_registry_rejects_an_unknown_kind_in_one_line() -> None:
    with pytest.raises(
        ValueError, match=r"unknown sink 'hdmi' \(choose from: speaker, wav, null\)"
    ):
        create_sink("hdmi")


# --- speaker without a device --------------------------------------------------------


def test_speaker_available_gives_a_reason_on_a_machine_without_a_sound_card() -> None:
    # A fresh process pointed at no PulseAudio server sees only what the machine has.
    env = {**os.environ, "PULSE_SERVER": "unix:/nonexistent/voice-membrane-test"}
    code = "from voice_membrane.sinks.speaker import speaker_available as a; print(a())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "None":
        pytest.skip("this machine has an audio output device")
    assert done.stdout.strip() == NO_DEVICE


def fake_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> None:
    """Make ``import name`` load ``source`` for the rest of the test."""
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    # setitem first so that teardown also removes the fake when the real module
    # had not been imported yet; then delitem so that the next import finds the fake.
    monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, name)


NO_DEFAULT_SOUNDDEVICE = """
class PortAudioError(Exception):
    pass

def query_devices(device=None, kind=None):
    raise PortAudioError("Error querying device -1")
"""

NO_DEFAULT_PYAUDIO = """
class PyAudio:
    def get_default_output_device_info(self):
        raise OSError("No Default Output Device Available")

    def terminate(self):
        pass
"""


def test_no_default_device_is_a_reason_and_a_sink_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_module(tmp_path, monkeypatch, "sounddevice", NO_DEFAULT_SOUNDDEVICE)
    fake_module(tmp_path, monkeypatch, "pyaudio", NO_DEFAULT_PYAUDIO)
    assert speaker_available("sounddevice") == NO_DEVICE
    assert speaker_available("pyaudio") == NO_DEVICE
    for backend in ("sounddevice", "pyaudio"):
        with pytest.raises(SinkError, match="no audio output device"):
            anyio.run(SpeakerSink(backend=backend).open)  # type: ignore[arg-type]


def test_missing_portaudio_library_is_a_reason_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What sounddevice raises at import when libportaudio2 is not installed.
    fake_module(
        tmp_path, monkeypatch, "sounddevice", 'raise OSError("PortAudio library not found")'
    )
    reason = speaker_available("sounddevice")
    assert reason is not None and "PortAudio library not found" in reason
    assert "\n" not in reason
    with pytest.raises(SinkError, match="PortAudio"):
        anyio.run(SpeakerSink().open)


def test_missing_pyaudio_package_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyaudio", None)  # makes ``import pyaudio`` fail
    reason = speaker_available("pyaudio")
    assert reason is not None and "pip install pyaudio" in reason


def test_speaker_rejects_an_unknown_backend() -> None:
    assert speaker_available("alsa") is not None
    with pytest.raises(ValueError, match="unknown speaker backend"):
        SpeakerSink(backend="alsa")  # type: ignore[arg-type]


def test_speaker_used_before_open_is_a_sink_error() -> None:
    with pytest.raises(SinkError, match="not open"):
        anyio.run(SpeakerSink().write, AudioChunk(ramp(10), 22050))
    assert SpeakerSink().played_seconds == 0.0


# --- the speaker's buffer and playback clock -----------------------------------------


def test_playback_buffer_is_bounded_and_keeps_order_across_the_wrap() -> None:
    buf = PlaybackBuffer(capacity=8, sample_rate=100)
    assert buf.push(ramp(5)) == 5
    out = np.empty(3, dtype=np.int16)
    buf.fill(out, now=0.0, delay=0.0)
    assert np.array_equal(out, ramp(5)[:3])
    assert buf.push(np.arange(10, 20, dtype=np.int16)) == 6  # 2 left + 6 = capacity
    out = np.empty(10, dtype=np.int16)
    buf.fill(out, now=0.1, delay=0.0)
    expected = np.concatenate([ramp(5)[3:], np.arange(10, 16), np.zeros(2)])
    assert np.array_equal(out, expected)  # silence after the buffered audio
    assert buf.buffered == 0 and buf.handed == 11


def test_playback_clock_counts_audio_once_the_device_latency_has_passed() -> None:
    rate = 100
    buf = PlaybackBuffer(capacity=100, sample_rate=rate)
    buf.push(ramp(30))
    block = np.empty(10, dtype=np.int16)
    buf.fill(block, now=1.0, delay=0.05)  # heard from 1.05 to 1.15
    buf.fill(block, now=1.1, delay=0.05)  # heard from 1.15 to 1.25
    assert buf.heard(1.14) == 0
    assert buf.heard(1.16) == 10
    assert buf.in_flight(1.16) == 20  # 10 in the device, 10 still buffered
    assert buf.clear() == 10  # a stop: the unsent rest is discarded
    assert buf.heard(1.3) == 20 and buf.in_flight(1.3) == 0
    buf.fill(block, now=1.3, delay=0.05)  # silence: nothing more to hear
    assert buf.heard(2.0) == 20


def test_a_paused_playback_buffer_plays_silence_and_keeps_its_audio() -> None:
    buf = PlaybackBuffer(capacity=100, sample_rate=100)
    buf.push(ramp(20))
    block = np.empty(10, dtype=np.int16)
    buf.set_paused(True)
    buf.fill(block, now=1.0, delay=0.0)
    assert not block.any() and buf.buffered == 20 and buf.handed == 0
    buf.set_paused(False)
    buf.fill(block, now=1.1, delay=0.0)
    assert np.array_equal(block, ramp(20)[:10])  # from the same sample
    buf.set_paused(True)
    assert buf.clear() == 10 and not buf.paused  # a stop ends the pause


def test_playback_buffer_notes_when_the_device_first_takes_an_utterances_audio() -> None:
    buf = PlaybackBuffer(capacity=100, sample_rate=100)
    block = np.empty(10, dtype=np.int16)
    buf.mark_start()
    buf.fill(block, now=0.0, delay=0.0)  # nothing buffered: silence, nothing taken
    buf.push(ramp(30))
    assert buf.first_taken_ns is None  # queued is not played
    before = time.perf_counter_ns()
    buf.fill(block, now=0.1, delay=0.0)
    first = buf.first_taken_ns
    assert first is not None and before <= first <= time.perf_counter_ns()
    buf.fill(block, now=0.2, delay=0.0)
    assert buf.first_taken_ns == first  # the utterance's first sample only
    buf.mark_start()
    assert buf.first_taken_ns is None


# --- the speaker on a device the test plays by hand ---------------------------------


def test_speaker_first_played_is_the_callback_that_takes_the_first_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    device = ManualDevice()
    monkeypatch.setattr(speaker_module, "open_stream", device.open_stream)
    sink = SpeakerSink(sample_rate=1000, buffer_seconds=0.05)  # 10-sample blocks

    async def two_utterances() -> None:
        await sink.open()
        try:
            await sink.write(AudioChunk(ramp(30), 1000))
            assert sink.first_played_ns is None  # in the buffer, not yet taken
            before = time.perf_counter_ns()
            device.pull()
            after = time.perf_counter_ns()
            first = sink.first_played_ns
            assert first is not None and before <= first <= after
            device.pull()
            device.pull()
            await sink.drain()
            assert sink.first_played_ns == first
            await sink.write(AudioChunk(ramp(30), 1000))
            assert sink.first_played_ns is None  # a new utterance, not yet taken
            device.pull()
            second = sink.first_played_ns
            assert second is not None and second > after
        finally:
            await sink.aclose()

    anyio.run(two_utterances)


def test_audio_written_to_a_paused_sink_is_first_played_at_the_resume() -> None:
    sink = NullSink(sample_rate=16000, realtime=True)

    async def held_from_the_start() -> tuple[int | None, int, int | None]:
        await sink.open()
        sink.pause()  # a held reply: paused before its first write
        await sink.write(AudioChunk(ramp(160), 16000))
        await anyio.sleep(0.1)
        during = sink.first_played_ns
        resumed = time.perf_counter_ns()
        sink.resume()
        await sink.drain()
        return during, resumed, sink.first_played_ns

    during, resumed, first = anyio.run(held_from_the_start)
    assert during is None  # nothing has played while held
    assert first is not None and first >= resumed

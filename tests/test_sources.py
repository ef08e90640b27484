"""Audio sources without a device: the WAV file source, the framer and the
stream resampler (property tests: cutting the input differently never changes
the output), the registry, and the microphone's "no device" path."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import anyio
import numpy as np
import pytest
import soundfile as sf
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.sources import (
    MicrophoneSource,
    SourceError,
    WavFileSource,
    input_available,
    open_source,
)
from voice_membrane.sources._framer import Framer
from voice_membrane.sources._resample import StreamResampler
from voice_membrane.sources.base import Frame
from voice_membrane.vocab.audio import Samples

RATE = 16000
FRAME = 320  # 20 ms


def read_all(source: WavFileSource) -> list[Frame]:
    async def main() -> list[Frame]:
        async with source:
            return [frame async for frame in source.frames()]

    return anyio.run(main)


def joined(frames: list[Frame]) -> Samples:
    return np.concatenate([f.samples for f in frames])


def noise(n: int, seed: int = 0, scale: float = 3000) -> Samples:
    values = np.random.default_rng(seed).normal(0, scale, n)
    return np.clip(np.round(values), -32768, 32767).astype(np.int16)


def test_frames_hold_every_sample_once_with_continuous_positions(tmp_path: Path) -> None:
    audio = noise(RATE + 123)  # not a whole number of frames
    sf.write(tmp_path / "a.wav", audio, RATE, subtype="PCM_16")
    frames = read_all(WavFileSource(tmp_path / "a.wav", realtime=False, tail_silence_s=0.1))
    assert all(len(f.samples) == FRAME and f.sample_rate == RATE for f in frames)
    assert [f.position for f in frames] == [i * FRAME for i in range(len(frames))]
    out = joined(frames)
    tail = round(0.1 * RATE)
    assert len(out) == -(-(len(audio) + tail) // FRAME) * FRAME  # padded to whole frames
    np.testing.assert_array_equal(out[: len(audio)], audio)
    assert not out[len(audio) :].any()  # then silence only
    assert all(a.captured_ns <= b.captured_ns for a, b in itertools.pairwise(frames))


def test_lead_silence_comes_first(tmp_path: Path) -> None:
    audio = noise(RATE // 2)
    sf.write(tmp_path / "a.wav", audio, RATE)
    frames = read_all(
        WavFileSource(tmp_path / "a.wav", realtime=False, lead_silence_s=0.25, tail_silence_s=0)
    )
    out = joined(frames)
    lead = RATE // 4
    assert not out[:lead].any()
    np.testing.assert_array_equal(out[lead : lead + len(audio)], audio)


def test_stereo_is_mixed_to_the_mean_of_its_channels(tmp_path: Path) -> None:
    left, right = noise(RATE, 1), noise(RATE, 2)
    sf.write(tmp_path / "s.wav", np.stack([left, right], axis=1), RATE, subtype="PCM_16")
    out = joined(read_all(WavFileSource(tmp_path / "s.wav", realtime=False, tail_silence_s=0)))
    expected = np.round((left.astype(np.float64) + right) / 2)
    np.testing.assert_array_equal(out[:RATE], expected.astype(np.int16))


def test_8_bit_is_scaled_to_16_bit(tmp_path: Path) -> None:
    codes = np.arange(-128, 128, dtype=np.int16)
    sf.write(tmp_path / "u8.wav", codes * 256, RATE, subtype="PCM_U8")
    out = joined(read_all(WavFileSource(tmp_path / "u8.wav", realtime=False, tail_silence_s=0)))
    np.testing.assert_array_equal(out[: len(codes)], codes * 256)


def test_24_bit_keeps_its_top_16_bits(tmp_path: Path) -> None:
    values = np.array([-(2**23), -1000 * 256 - 100, 0, 4242 * 256 + 200, 2**23 - 1], np.int32)
    sf.write(tmp_path / "p24.wav", values << 8, RATE, subtype="PCM_24")
    out = joined(read_all(WavFileSource(tmp_path / "p24.wav", realtime=False, tail_silence_s=0)))
    expected = np.clip(np.round(values / 256), -32768, 32767).astype(np.int16)
    np.testing.assert_array_equal(out[: len(values)], expected)


def test_float_is_scaled_and_clipped(tmp_path: Path) -> None:
    values = np.array([-2.0, -1.0, -0.5, 0.0, 0.25, 0.999, 1.0, 3.5], dtype=np.float32)
    sf.write(tmp_path / "f.wav", values, RATE, subtype="FLOAT")
    out = joined(read_all(WavFileSource(tmp_path / "f.wav", realtime=False, tail_silence_s=0)))
    expected = np.clip(np.round(values.astype(np.float64) * 32768), -32768, 32767)
    np.testing.assert_array_equal(out[: len(values)], expected.astype(np.int16))


@pytest.mark.parametrize("file_rate", [8000, 22050, 44100, 48000])
def test_other_rates_are_resampled_faithfully(tmp_path: Path, file_rate: int) -> None:
    seconds, hz = 1.0, 440.0
    t = np.arange(round(seconds * file_rate)) / file_rate
    stereo = np.stack([np.sin(2 * np.pi * hz * t)] * 2, axis=1) * 0.5
    sf.write(tmp_path / "r.wav", stereo, file_rate, subtype="PCM_16")
    source = WavFileSource(tmp_path / "r.wav", realtime=False, tail_silence_s=0)
    out = joined(read_all(source)).astype(np.float64)
    assert source.file_rate == file_rate and source.file_channels == 2
    assert len(out) == -(-RATE // FRAME) * FRAME
    expected = 0.5 * 32768 * np.sin(2 * np.pi * hz * np.arange(RATE) / RATE)
    inner = slice(200, RATE - 200)  # the filter's edges aside
    error = np.abs(out[:RATE] - expected)[inner].max()
    # No shift, no drift: within 1 % of the amplitude going down (filtered), 2 % going
    # up (linear interpolation between the file's samples, ~1.5 % off at 440 Hz from 8 kHz).
    assert error < (0.01 if file_rate > RATE else 0.02) * 16384


def test_what_a_lower_rate_cannot_hold_is_removed_not_folded(tmp_path: Path) -> None:
    file_rate = 44100
    t = np.arange(file_rate) / file_rate
    sf.write(tmp_path / "hiss.wav", 0.5 * np.sin(2 * np.pi * 12000 * t), file_rate)
    out = joined(read_all(WavFileSource(tmp_path / "hiss.wav", realtime=False, tail_silence_s=0)))
    rms = float(np.sqrt((out[200 : RATE - 200].astype(np.float64) ** 2).mean()))
    assert rms < 20, f"a 12 kHz tone folded into the 16 kHz output at RMS {rms:.0f}"


def test_realtime_takes_the_audio_s_duration_and_fast_mode_does_not_wait(tmp_path: Path) -> None:
    sf.write(tmp_path / "a.wav", noise(RATE), RATE)  # 1 s
    started = time.monotonic()
    paced = read_all(WavFileSource(tmp_path / "a.wav", tail_silence_s=0))
    elapsed = time.monotonic() - started
    assert elapsed >= 0.95  # frame i is not handed over before (i + 1) * 20 ms
    assert elapsed < 30  # a hang guard, not a speed target
    fast = read_all(WavFileSource(tmp_path / "a.wav", realtime=False, tail_silence_s=0))
    np.testing.assert_array_equal(joined(paced), joined(fast))


def test_realtime_schedule_is_absolute(tmp_path: Path) -> None:
    """A consumer that is late gets the frames due at once: no drift accumulates."""
    sf.write(tmp_path / "a.wav", noise(RATE), RATE)

    async def main() -> float:
        async with WavFileSource(tmp_path / "a.wav", tail_silence_s=0) as source:
            started = time.monotonic()
            async for frame in source.frames():
                if frame.position == 0:
                    time.sleep(0.5)  # blocks the loop: 25 frames fall due meanwhile
            return time.monotonic() - started

    elapsed = anyio.run(main)
    assert 0.95 <= elapsed < 1.45  # still ~1 s in all, not 1.5 s


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"RIFF\x00\x00\x00\x00WAVEnot really", "not a sound file that can be read"),
        (b"hello, I am text", "not a sound file that can be read"),
    ],
)
def test_a_file_that_is_not_audio_is_one_line(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "bad.wav"
    path.write_bytes(content)
    with pytest.raises(SourceError) as info:
        read_all(WavFileSource(path))
    message = str(info.value)
    assert expected in message and str(path) in message and "\n" not in message


def test_empty_missing_and_directory_are_one_line(tmp_path: Path) -> None:
    sf.write(tmp_path / "empty.wav", np.zeros(0, np.int16), RATE)
    cases = {
        tmp_path / "empty.wav": "holds no audio",
        tmp_path / "missing.wav": "no such file",
        tmp_path: "is a directory",
    }
    for path, expected in cases.items():
        with pytest.raises(SourceError, match=expected) as info:
            read_all(WavFileSource(path))
        assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_a_truncated_file_keeps_what_it_has(tmp_path: Path) -> None:
    audio = noise(RATE)
    sf.write(tmp_path / "t.wav", audio, RATE, subtype="PCM_16")
    data = (tmp_path / "t.wav").read_bytes()
    (tmp_path / "t.wav").write_bytes(data[: len(data) // 2])  # the header still says 1 s
    out = joined(read_all(WavFileSource(tmp_path / "t.wav", realtime=False, tail_silence_s=0)))
    kept = (len(data) // 2 - 44) // 2
    np.testing.assert_array_equal(out[:kept], audio[:kept])


def test_frames_are_iterated_once_per_opening(tmp_path: Path) -> None:
    sf.write(tmp_path / "a.wav", noise(FRAME), RATE)

    async def main() -> None:
        async with WavFileSource(tmp_path / "a.wav", realtime=False) as source:
            _ = [f async for f in source.frames()]
            with pytest.raises(SourceError, match="once"):
                _ = [f async for f in source.frames()]

    anyio.run(main)


def test_registry(tmp_path: Path) -> None:
    source = open_source(f"wav:{tmp_path / 'x.wav'}", realtime=False, frame_ms=32)
    assert isinstance(source, WavFileSource) and source.frame_samples == 512
    assert isinstance(open_source("microphone", rate=8000), MicrophoneSource)
    with pytest.raises(ValueError, match="unknown audio source"):
        open_source("speaker")
    with pytest.raises(ValueError, match="wav:PATH"):
        open_source("wav:")


def test_no_input_device_is_one_line_naming_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine has no sound card: without a PulseAudio server there is no input."""
    monkeypatch.delenv("PULSE_SERVER", raising=False)
    reason = input_available()
    if reason is None:
        pytest.skip("this machine has a microphone")
    assert "--input FILE.wav" in reason and "\n" not in reason

    async def main() -> None:
        async with MicrophoneSource():
            pass

    with pytest.raises(SourceError) as info:
        anyio.run(main)
    assert "--input FILE.wav" in str(info.value)


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(SourceError, match="unknown microphone backend"):
        MicrophoneSource(backend="jack")
    assert "unknown microphone backend" in (input_available("jack") or "")


# -- the sans-I/O pieces: any cutting of the input gives the same output --------


def cut(data: Samples, sizes: list[int]) -> list[Samples]:
    pieces, i = [], 0
    for size in sizes:
        pieces.append(data[i : i + size])
        i += size
    pieces.append(data[i:])
    return pieces


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 3000),
    frame=st.integers(1, 700),
    sizes=st.lists(st.integers(0, 900), max_size=12),
)
def test_framer_output_does_not_depend_on_the_cutting(n: int, frame: int, sizes: list[int]) -> None:
    data = noise(n, seed=n)
    framer = Framer(frame)
    frames = [f for piece in cut(data, sizes) for f in framer.feed(piece)] + framer.flush()
    assert all(len(f) == frame for f in frames)
    out = np.concatenate(frames) if frames else np.zeros(0, np.int16)
    assert len(out) == -(-n // frame) * frame
    np.testing.assert_array_equal(out[:n], data)
    assert not out[n:].any()


@settings(max_examples=60, deadline=None)
@given(
    rates=st.sampled_from(
        [
            (44100, 16000),
            (48000, 16000),
            (8000, 16000),
            (22050, 16000),
            (16000, 16000),
            (16000, 8000),
            (11025, 24000),
        ]
    ),
    n=st.integers(0, 5000),
    sizes=st.lists(st.integers(0, 1500), max_size=10),
)
def test_resampler_output_does_not_depend_on_the_cutting(
    rates: tuple[int, int], n: int, sizes: list[int]
) -> None:
    src, dst = rates
    data = noise(n, seed=n)
    whole = StreamResampler(src, dst)
    expected = np.concatenate([whole.feed(data), whole.flush()])
    assert len(expected) == round(n * dst / src)
    pieces = StreamResampler(src, dst)
    got = np.concatenate([pieces.feed(p) for p in cut(data, sizes)] + [pieces.flush()])
    np.testing.assert_allclose(got, expected, atol=1e-6)

"""MicrophoneSource through a real audio server: a private PulseAudio whose
virtual microphone speaks a WAV file (testing/pulse.py). What the source
captured is compared with the file: cross-correlation finds it, the level is
within a few dB; a server that dies mid-session is one SourceError. The
capture buffer's overrun logic is tested directly (no device can be made to
stall on demand). Timing assertions are generous hang guards only."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import anyio
import numpy as np
import pytest
import soundfile as sf

from voice_membrane.sources import MicrophoneSource, SourceError, input_available
from voice_membrane.sources._capture import CaptureBuffer
from voice_membrane.testing.pulse import (
    PulseServer,
    PulseUnavailable,
    VirtualMicrophone,
    pulse_null_sink,
)
from voice_membrane.vocab.audio import Samples

RATE = 16000
BACKENDS = [
    "sounddevice",
    pytest.param(
        "pyaudio",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("pyaudio") is None, reason="pyaudio is not installed"
        ),
    ),
]


def speech_like(seconds: float, rate: int) -> Samples:
    """A chirp under an envelope: one clear peak when cross-correlated."""
    t = np.arange(round(seconds * rate)) / rate
    hz = 200 + 1500 * t / seconds
    wave = np.sin(2 * np.pi * np.cumsum(hz) / rate) * np.sin(np.pi * t / seconds) ** 0.5
    return np.round(0.4 * 32767 * wave).astype(np.int16)


def level_db(x: Samples) -> float:
    return float(20 * np.log10(np.sqrt(np.mean(x.astype(np.float64) ** 2)) + 1e-9))


@pytest.fixture(scope="module")
def mic(pulse: PulseServer) -> VirtualMicrophone:
    return pulse.microphone()


def capture_while_playing(
    mic: VirtualMicrophone, path: Path, backend: str, seconds: float
) -> tuple[Samples, MicrophoneSource]:
    async def main() -> tuple[Samples, MicrophoneSource]:
        got: list[Samples] = []
        positions: list[int] = []
        source = MicrophoneSource(backend=backend, rate=RATE)
        with anyio.fail_after(30):  # a hang guard
            async with source:
                player = None
                async for frame in source.frames():
                    got.append(frame.samples)
                    positions.append(frame.position)
                    if player is None:  # the device delivers: speak now
                        player = mic.play(path)
                        started = time.monotonic()
                    elif player.poll() is not None and time.monotonic() - started > seconds + 0.8:
                        break
        assert positions == [i * source.frame_samples for i in range(len(positions))]
        return np.concatenate(got), source

    return anyio.run(main)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("file_rate", [RATE, 44100])
def test_records_what_the_microphone_hears(
    mic: VirtualMicrophone, backend: str, file_rate: int, tmp_path: Path
) -> None:
    assert input_available(backend) is None
    played = speech_like(1.5, RATE)
    path = tmp_path / "say.wav"
    # The file at another rate too: PulseAudio converts it, then the source.
    t_src = speech_like(1.5, file_rate)
    sf.write(path, t_src, file_rate, subtype="PCM_16")
    captured, source = capture_while_playing(mic, path, backend, 1.5)
    assert source.overruns == 0 and source.dropped_samples == 0

    corr = np.correlate(captured.astype(np.float64), played.astype(np.float64), mode="valid")
    at = int(np.argmax(np.abs(corr)))
    segment = captured[at : at + len(played)]
    norm = np.linalg.norm(segment.astype(np.float64)) * np.linalg.norm(played.astype(np.float64))
    assert corr[at] / norm > 0.9, "the played file is not in what was captured"
    assert abs(level_db(segment) - level_db(played)) < 3.0
    rest = np.concatenate((captured[: max(0, at - 800)], captured[at + len(played) + 800 :]))
    assert level_db(rest) < level_db(played) - 30  # silence around it


def test_a_dying_audio_server_is_one_source_error(tmp_path: Path) -> None:
    """Its own server: killing it ends the stream; the source says so once and closes."""
    try:
        server_cm = pulse_null_sink()
        server = server_cm.__enter__()
    except PulseUnavailable as exc:
        pytest.skip(str(exc))
    try:
        server.microphone()

        async def main() -> tuple[int, str]:
            frames = 0
            with anyio.fail_after(30):
                async with MicrophoneSource(rate=RATE) as source:
                    with pytest.raises(SourceError) as info:
                        async for _ in source.frames():
                            frames += 1
                            if frames == 10:
                                server.kill()
            return frames, str(info.value)

        frames, message = anyio.run(main)
        assert frames >= 10
        assert message.startswith("the microphone") and "stopped" in message
        assert "\n" not in message
    finally:
        server_cm.__exit__(None, None, None)


def test_a_full_buffer_drops_whole_blocks_and_counts_them() -> None:
    buffer = CaptureBuffer(capacity=1000)
    blocks = [np.full(300, i, dtype=np.int16) for i in range(5)]
    for i, block in enumerate(blocks):
        buffer.put(block, now_ns=i, device_overflow=(i == 4))
    assert buffer.overruns == 2 and buffer.dropped == 600  # blocks 3 and 4 did not fit
    assert buffer.device_overflows == 1 and buffer.last_put_ns == 4
    samples, arrivals = buffer.take()
    np.testing.assert_array_equal(samples, np.concatenate(blocks[:3]))
    assert arrivals == [(300, 0), (600, 1), (900, 2)]
    buffer.put(blocks[4], now_ns=9)  # wraps around the end of the ring
    buffer.put(blocks[3], now_ns=10)
    samples, arrivals = buffer.take()
    np.testing.assert_array_equal(samples, np.concatenate((blocks[4], blocks[3])))
    assert arrivals == [(1200, 9), (1500, 10)]
    assert buffer.take()[0].size == 0

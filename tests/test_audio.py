"""AudioChunk and the PCM conversions and resampling every engine and sink relies on."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from voice_membrane.vocab.audio import (
    AudioChunk,
    pcm16_from_bytes,
    pcm16_from_float,
    pcm16_from_ulaw,
    resample,
    ulaw_from_pcm16,
)


def test_pcm16_from_bytes_is_little_endian() -> None:
    samples = pcm16_from_bytes(b"\x01\x00\xff\xff\x00\x80\xff\x7f")
    assert samples.dtype == np.int16
    assert samples.tolist() == [1, -1, -32768, 32767]


def test_pcm16_from_bytes_empty() -> None:
    assert len(pcm16_from_bytes(b"")) == 0


def test_pcm16_from_float_scales_rounds_and_clips() -> None:
    floats = np.array([0.0, 1.0, -1.0, 0.5, 2.0, -3.0, 1 / 32767 * 0.6])
    assert pcm16_from_float(floats).tolist() == [0, 32767, -32767, 16384, 32767, -32767, 1]
    assert pcm16_from_float(floats).dtype == np.int16


def test_float_round_trip_is_within_one_step() -> None:
    samples = np.arange(-32767, 32768, 97, dtype=np.int16)
    back = pcm16_from_float(samples.astype(np.float64) / 32767.0)
    assert np.max(np.abs(back.astype(int) - samples)) <= 1


def test_chunk_seconds() -> None:
    assert AudioChunk(np.zeros(11025, np.int16), 22050).seconds == 0.5


@pytest.mark.parametrize(
    ("n", "src", "dst", "expected"),
    [
        (22050, 22050, 48000, 48000),
        (441, 44100, 16000, 160),
        (1000, 16000, 22050, 1378),
        (3, 48000, 8000, 1),
        (1, 8000, 48000, 6),
    ],
)
def test_resample_length(n: int, src: int, dst: int, expected: int) -> None:
    out = resample(np.zeros(n, np.int16), src, dst)
    assert len(out) == expected
    assert out.dtype == np.int16


def test_resample_same_rate_and_empty_are_unchanged() -> None:
    samples = np.array([1, 2, 3], np.int16)
    assert resample(samples, 16000, 16000) is samples
    assert len(resample(np.zeros(0, np.int16), 16000, 48000)) == 0


def test_resample_interpolates_linearly() -> None:
    out = resample(np.array([0, 100, 200, 300], np.int16), 1, 2)
    assert out.tolist() == [0, 50, 100, 150, 200, 250, 300, 300]  # the last edge is held


def test_resample_keeps_a_tone_and_its_level() -> None:
    rate_in, rate_out, freq = 22050, 48000, 440.0
    t = np.arange(rate_in) / rate_in
    tone = pcm16_from_float(0.5 * np.sin(2 * np.pi * freq * t))
    out = resample(tone, rate_in, rate_out)
    expected = 0.5 * 32767 * np.sin(2 * np.pi * freq * np.arange(len(out)) / rate_out)
    inner = slice(0, len(out) - 3)  # past the last input sample the edge is held
    assert np.max(np.abs(out[inner] - expected[inner])) < 0.01 * 32767
    spectrum = np.abs(np.fft.rfft(out))
    assert abs(np.argmax(spectrum) * rate_out / len(out) - freq) < 2


def test_ulaw_codes_match_the_g711_reference() -> None:
    # Codes of the reference encoder (as Python's former audioop.lin2ulaw gave them).
    samples = np.array([0, -1, 8, -8, 1000, -1000, 32767, -32768], np.int16)
    assert ulaw_from_pcm16(samples).hex() == "ff7efe7ece4e8000"
    assert pcm16_from_ulaw(bytes.fromhex("ff7efe7ece4e8000")).tolist() == [
        0, -8, 8, -8, 988, -988, 32124, -32124,
    ]  # fmt: skip


def test_ulaw_round_trip() -> None:
    every_code = bytes(b for b in range(256) if b != 0x7F)  # 0x7F is "-0": it decodes to 0
    assert ulaw_from_pcm16(pcm16_from_ulaw(every_code)) == every_code
    samples = np.arange(-32768, 32768, 7, dtype=np.int16)
    back = pcm16_from_ulaw(ulaw_from_pcm16(samples)).astype(np.int32)
    error = np.abs(back - samples)
    # Logarithmic steps: within 1/16 of the magnitude (plus the smallest step), never worse.
    assert np.all(error <= np.abs(samples.astype(np.int32)) // 16 + 8)
    assert len(ulaw_from_pcm16(samples)) == len(samples)


def test_ulaw_tables_give_every_code_of_the_reference() -> None:
    # Every int16 and every code, against Python's own G.711 (audioop: 3.11 and 3.12).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = pytest.importorskip("audioop")
    every_sample = np.arange(-32768, 32768, dtype=np.int16)
    assert ulaw_from_pcm16(every_sample) == audioop.lin2ulaw(every_sample.tobytes(), 2)
    assert ulaw_from_pcm16(every_sample[::-7]) == audioop.lin2ulaw(every_sample[::-7].tobytes(), 2)
    every_code = bytes(range(256))
    decoded = np.frombuffer(audioop.ulaw2lin(every_code, 2), dtype="<i2")
    assert pcm16_from_ulaw(every_code).tolist() == decoded.tolist()
    assert pcm16_from_ulaw(every_code).dtype == np.int16
    # Wider integers are clipped as the reference encoder clips them.
    wide = np.array([70000, -70000, 5], dtype=np.int32)
    assert ulaw_from_pcm16(wide) == ulaw_from_pcm16(np.array([32767, -32768, 5], np.int16))

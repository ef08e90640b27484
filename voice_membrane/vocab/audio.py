"""Audio buffers as they travel from a TTS engine to a sink.

Audio is mono 16-bit PCM held in numpy ``int16`` arrays: the format every engine
here produces natively and every sink accepts. Conversions are vectorised numpy
(no per-sample Python loops).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Samples = npt.NDArray[np.int16]
"""Mono int16 PCM samples."""


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """A piece of mono int16 audio at ``sample_rate`` Hz."""

    samples: Samples
    sample_rate: int

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.sample_rate


def pcm16_from_bytes(data: bytes) -> Samples:
    """Little-endian 16-bit PCM bytes (an even count) as samples."""
    samples: Samples = np.frombuffer(data, dtype="<i2").astype(np.int16, copy=False)
    return samples


def pcm16_from_float(samples: npt.NDArray[np.floating]) -> Samples:
    """Float samples in [-1, 1] as int16, clipped."""
    scaled = np.clip(samples, -1.0, 1.0) * 32767.0
    out: Samples = np.round(scaled).astype(np.int16)
    return out


def resample(samples: Samples, src_rate: int, dst_rate: int) -> Samples:
    """``samples`` at ``src_rate`` converted to ``dst_rate`` (linear interpolation).

    Speech chunks are resampled one at a time; linear interpolation keeps each
    chunk's length exact (``round(n * dst / src)``) and costs microseconds.
    """
    if src_rate == dst_rate or len(samples) == 0:
        return samples
    n_out = max(1, round(len(samples) * dst_rate / src_rate))
    positions = np.arange(n_out, dtype=np.float64) * (src_rate / dst_rate)
    out = np.interp(positions, np.arange(len(samples)), samples.astype(np.float64))
    return np.round(out).astype(np.int16)


# G.711 μ-law (telephony audio, ElevenLabs' ulaw_8000): 8-bit logarithmic codes, as
# in the reference encoder (14-bit magnitude, bias 33; the same codes as the
# standard library's former audioop.lin2ulaw).
_ULAW_BIAS = 0x21
_ULAW_CLIP = 8159


def _ulaw_codes(samples: Samples) -> Samples:
    """The reference encoder, computed: the table below is built with it."""
    x = samples.astype(np.int32) >> 2
    mask = np.where(x < 0, 0x7F, 0xFF)
    magnitude = np.minimum(np.abs(x), _ULAW_CLIP) + _ULAW_BIAS  # 33..8192
    segment = np.maximum(np.floor(np.log2(magnitude)).astype(np.int32) - 5, 0)
    code = (segment << 4) | ((magnitude >> (segment + 1)) & 0x0F)
    code = np.where(magnitude > 0x1FFF, 0x7F, code)  # beyond the last segment
    out: Samples = (code ^ mask).astype(np.uint8)
    return out


def _pcm16_values(codes: Samples) -> Samples:
    """The reference decoder, computed: the table below is built with it."""
    code = ~codes.astype(np.int32) & 0xFF
    exponent = (code >> 4) & 0x07
    magnitude = (((code & 0x0F) << 3) + 0x84) << exponent
    value = magnitude - 0x84
    out: Samples = np.where(code & 0x80, -value, value).astype(np.int16)
    return out


# Every code of every int16 (indexed by its bits as uint16) and every sample of
# every code: a call's 50 frames a second each way are one lookup each rather
# than a dozen array passes.
_ULAW_OF_BITS = _ulaw_codes(np.arange(-32768, 32768, dtype=np.int32).astype(np.int16))
_ULAW_OF_BITS = np.roll(_ULAW_OF_BITS, -32768)  # index 0 is the sample 0, 0xFFFF is -1
_PCM16_OF_CODE = _pcm16_values(np.arange(256, dtype=np.uint8))


def ulaw_from_pcm16(samples: Samples) -> bytes:
    """int16 samples as G.711 μ-law bytes, one per sample."""
    if samples.dtype != np.int16:  # (wider integers are clipped as the reference does)
        return _ulaw_codes(samples).tobytes()
    return _ULAW_OF_BITS[samples.view(np.uint16)].tobytes()


def pcm16_from_ulaw(data: bytes) -> Samples:
    """G.711 μ-law bytes (one per sample) as int16 samples."""
    out: Samples = _PCM16_OF_CODE[np.frombuffer(data, dtype=np.uint8)]
    return out

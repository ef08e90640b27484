"""Where the speech in a clip begins and ends, for the benchmarks' stopwatches.

A block is voiced when it is louder than the detector's own loudness gate
(``VadSettings.min_level_dbfs``, -50 dBFS): quieter than that the detector
hears silence, so no end silence can start before it. The blocks are the
detector's own (``LEVEL_BLOCK_S``, 4 ms), counted from the clip's first
sample; a caller starts a clip at a frame's start, and a frame (20 ms) is
whole blocks, so the marks fall on the detector's grid. (A -40 dBFS mark put
the end of ``weather.wav`` 20 ms inside its fading last syllable, and 5 ms
blocks 4 ms before the detector's end: both counted sound the detector
rightly hears as speech as the pipeline's delay.)
"""

from __future__ import annotations

from ..listening.front import LEVEL_BLOCK_S, level_block
from ..listening.settings import VadSettings
from ..listening.vad import block_levels
from ..vocab.audio import Samples

VOICED_DBFS = VadSettings().min_level_dbfs


def voiced_bounds(samples: Samples, rate: int) -> tuple[int, int]:
    """The first and the last voiced sample: the start of the first block above
    ``VOICED_DBFS`` and the end of the last."""
    block = level_block(rate)
    whole = len(samples) // block * block
    levels = block_levels(samples[:whole], block)  # as the detector measures them
    voiced = [i * block for i, level in enumerate(levels) if level > VOICED_DBFS]
    if not voiced:
        raise ValueError(f"no {LEVEL_BLOCK_S * 1000:g} ms block above {VOICED_DBFS:g} dBFS")
    return voiced[0], voiced[-1] + block - 1


def captured_at(sent: float, frame_end: int, boundary: int, rate: int) -> float:
    """When sample boundary ``boundary`` of a real-time stream was captured, as a
    microphone dates it: the frame ending at boundary ``frame_end`` went out at
    ``sent``, once its last sample was in, so each sample before that end is
    ``1 / rate`` earlier. (A speech end or onset dated by its frame's send
    would be late by the rest of that frame: up to 20 ms.)"""
    if boundary > frame_end:
        raise ValueError(f"sample boundary {boundary} is after the frame's end {frame_end}")
    return sent - (frame_end - boundary) / rate

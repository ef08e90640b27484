"""Where the speech in a clip begins and ends, for the benchmarks' stopwatches.

A 5 ms block is voiced when it is louder than the detector's own loudness gate
(``VadSettings.min_level_dbfs``, -50 dBFS): quieter than that the detector
hears silence, so no end silence can start before it. (A -40 dBFS mark put the
end of ``weather.wav`` 20 ms inside its fading last syllable, counting sound
the detector rightly hears as speech as the pipeline's delay.)
"""

from __future__ import annotations

from ..listening.settings import VadSettings
from ..listening.vad import level_dbfs
from ..vocab.audio import Samples

VOICED_DBFS = VadSettings().min_level_dbfs
BLOCK_S = 0.005


def voiced_bounds(samples: Samples, rate: int) -> tuple[int, int]:
    """The first and the last voiced sample: the start of the first block above
    ``VOICED_DBFS`` and the end of the last."""
    block = max(1, round(rate * BLOCK_S))
    voiced = [
        start
        for start in range(0, len(samples) - block + 1, block)
        if level_dbfs(samples[start : start + block]) > VOICED_DBFS
    ]
    if not voiced:
        raise ValueError(f"no {BLOCK_S * 1000:g} ms block above {VOICED_DBFS:g} dBFS")
    return voiced[0], voiced[-1] + block - 1

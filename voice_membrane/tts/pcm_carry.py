"""16-bit PCM from a byte stream whose chunks need not end on a sample.

An HTTP body arrives in network chunks of any size: a 2-byte sample may be cut
in two. The odd byte is carried to the next chunk, never dropped: dropping it
would shift every later sample by one byte and turn the rest into noise. Sans-I/O.
"""

from __future__ import annotations

import numpy as np

from ..vocab.audio import Samples


class Pcm16Carry:
    """``feed(bytes)`` gives the whole little-endian int16 samples received so far
    (possibly none); a byte left over waits for the next chunk."""

    def __init__(self) -> None:
        self._odd = b""

    def feed(self, data: bytes) -> Samples:
        if self._odd:
            data = self._odd + data
        whole = len(data) // 2
        self._odd = data[2 * whole :]
        samples: Samples = np.frombuffer(data, dtype="<i2", count=whole).astype(
            np.int16, copy=False
        )
        return samples

    @property
    def leftover(self) -> int:
        """Bytes waiting for their other half (0 or 1). At the end of a body it is
        half a sample: nothing that can be played, so it is dropped."""
        return len(self._odd)

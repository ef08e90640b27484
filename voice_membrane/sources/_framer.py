"""Cutting a stream of samples into fixed-size frames (sans-I/O)."""

from __future__ import annotations

import numpy as np

from ..vocab.audio import Samples


class Framer:
    """``feed`` samples in any pieces, get whole frames of ``frame_samples``;
    ``flush`` returns the last partial frame padded with silence (none if the
    stream ended on a frame boundary). The frames never depend on the pieces."""

    def __init__(self, frame_samples: int) -> None:
        if frame_samples < 1:
            raise ValueError(f"frame_samples must be positive, got {frame_samples}")
        self.frame_samples = frame_samples
        self._pending: Samples = np.zeros(0, dtype=np.int16)

    @property
    def pending(self) -> int:
        """Samples waiting for the rest of their frame."""
        return len(self._pending)

    def feed(self, samples: Samples) -> list[Samples]:
        data = np.concatenate((self._pending, samples)) if len(self._pending) else samples
        whole = len(data) // self.frame_samples * self.frame_samples
        n = self.frame_samples
        frames = [data[i : i + n].copy() for i in range(0, whole, n)]
        self._pending = data[whole:].copy()
        return frames

    def flush(self) -> list[Samples]:
        if not len(self._pending):
            return []
        frame = np.zeros(self.frame_samples, dtype=np.int16)
        frame[: len(self._pending)] = self._pending
        self._pending = np.zeros(0, dtype=np.int16)
        return [frame]

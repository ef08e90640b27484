"""The bounded buffer between an input device's callback thread and the event loop.

The callback ``put``s each block it receives (mono int16 at the device's rate)
and never waits: when the reader has fallen so far behind that the block does
not fit, the block is dropped and counted (an overrun), so the device thread is
never held up. The reader ``take``s everything buffered, with the time each
block arrived. One lock guards everything; each side holds it for a copy of a
few milliseconds of audio.
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np

from ..vocab.audio import Samples


class CaptureBuffer:
    """A FIFO of at most ``capacity`` int16 samples, with block arrival times."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self._lock = threading.Lock()
        self._buf = np.zeros(capacity, dtype=np.int16)
        self._start = 0
        self._size = 0
        self._received = 0  # samples kept since the start (their stream index)
        self._arrivals: deque[tuple[int, int]] = deque()  # (kept samples after block, ns)
        self._overruns = 0
        self._dropped = 0
        self._device_overflows = 0
        self._last_put_ns: int | None = None

    @property
    def capacity(self) -> int:
        return len(self._buf)

    def put(self, samples: Samples, now_ns: int, device_overflow: bool = False) -> None:
        """Callback side: keep the block whole, or drop it whole if it does not fit."""
        with self._lock:
            self._last_put_ns = now_ns
            if device_overflow:
                self._device_overflows += 1
            n = len(samples)
            cap = len(self._buf)
            if n > cap - self._size:
                self._overruns += 1
                self._dropped += n
                return
            end = (self._start + self._size) % cap
            first = min(n, cap - end)
            self._buf[end : end + first] = samples[:first]
            self._buf[: n - first] = samples[first:]
            self._size += n
            self._received += n
            self._arrivals.append((self._received, now_ns))

    def take(self) -> tuple[Samples, list[tuple[int, int]]]:
        """Reader side: everything buffered, and for each block taken the count of
        samples kept up to its end with the ``perf_counter_ns`` it arrived at."""
        with self._lock:
            cap = len(self._buf)
            n = self._size
            first = min(n, cap - self._start)
            out = np.concatenate(
                (self._buf[self._start : self._start + first], self._buf[: n - first])
            )
            self._start = (self._start + n) % cap
            self._size = 0
            arrivals = list(self._arrivals)
            self._arrivals.clear()
            return out, arrivals

    @property
    def overruns(self) -> int:
        """Blocks dropped because the buffer was full."""
        with self._lock:
            return self._overruns

    @property
    def dropped(self) -> int:
        """Samples in those blocks."""
        with self._lock:
            return self._dropped

    @property
    def device_overflows(self) -> int:
        """Callbacks in which PortAudio said it had lost input itself."""
        with self._lock:
            return self._device_overflows

    @property
    def last_put_ns(self) -> int | None:
        with self._lock:
            return self._last_put_ns

"""The bounded buffer between the event loop and an audio device's callback thread.

The event loop ``push``es samples; the device's callback ``fill``s each output
block from it (silence where it runs dry) and notes when that audio will reach
the speaker, so ``heard`` can tell how much has actually been played, and the
moment it first takes a sample after ``mark_start`` (the start of an utterance).
One lock guards everything; each side holds it only for a copy of a few
milliseconds of audio.
"""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np

from ..vocab.audio import Samples


class PlaybackBuffer:
    """A FIFO of at most ``capacity`` int16 samples, plus the playback clock."""

    def __init__(self, capacity: int, sample_rate: int) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self._rate = float(sample_rate)
        self._lock = threading.Lock()
        self._buf = np.zeros(capacity, dtype=np.int16)
        self._start = 0  # index of the oldest buffered sample
        self._size = 0
        self._handed = 0  # samples of audio handed to the device so far
        self._heard = 0  # of those, samples whose playing time has passed
        # (monotonic time the block's last sample is heard, _handed after it),
        # oldest first; only blocks still in the device's pipeline stay here.
        self._pending: deque[tuple[float, int]] = deque()
        self._last_fill: float | None = None
        self._awaiting_first = False  # between mark_start and the next non-empty fill
        self._paused = False  # the callback plays silence and takes nothing
        self._first_taken_ns: int | None = None

    @property
    def capacity(self) -> int:
        return len(self._buf)

    @property
    def buffered(self) -> int:
        with self._lock:
            return self._size

    @property
    def handed(self) -> int:
        with self._lock:
            return self._handed

    @property
    def last_fill(self) -> float | None:
        """Monotonic time of the device's latest callback (None before the first)."""
        with self._lock:
            return self._last_fill

    @property
    def first_taken_ns(self) -> int | None:
        """``perf_counter_ns`` of the first fill that took audio after ``mark_start``."""
        with self._lock:
            return self._first_taken_ns

    @property
    def paused(self) -> bool:
        with self._lock:
            return self._paused

    def set_paused(self, paused: bool) -> None:
        """Hold what is buffered (the next callback plays silence) or play on."""
        with self._lock:
            self._paused = paused

    def mark_start(self) -> None:
        """The next sample the device takes begins an utterance: note when it does."""
        with self._lock:
            self._awaiting_first = True
            self._first_taken_ns = None

    def push(self, samples: Samples) -> int:
        """Append as many of ``samples`` as fit; return how many did."""
        with self._lock:
            cap = len(self._buf)
            n = min(len(samples), cap - self._size)
            end = (self._start + self._size) % cap
            first = min(n, cap - end)
            self._buf[end : end + first] = samples[:first]
            self._buf[: n - first] = samples[first:n]
            self._size += n
            return n

    def fill(self, out: Samples, now: float, delay: float) -> None:
        """Callback side: fill ``out`` from the buffer, silence after it.

        ``delay`` is how long until the first sample of ``out`` is heard
        (the stream's output latency at this callback).
        """
        with self._lock:
            self._last_fill = now
            cap = len(self._buf)
            n = 0 if self._paused else min(len(out), self._size)
            first = min(n, cap - self._start)
            out[:first] = self._buf[self._start : self._start + first]
            out[first:n] = self._buf[: n - first]
            out[n:] = 0
            self._start = (self._start + n) % cap
            self._size -= n
            if n:
                if self._awaiting_first:
                    self._first_taken_ns = time.perf_counter_ns()
                    self._awaiting_first = False
                self._handed += n
                done_at = now + delay + n / self._rate
                self._pending.append((done_at, self._handed))
            self._advance(now)

    def clear(self) -> int:
        """Drop everything buffered (not yet handed to the device), ending a
        pause; return how much."""
        with self._lock:
            dropped = self._size
            self._start = 0
            self._size = 0
            self._paused = False
            return dropped

    def heard(self, now: float) -> int:
        """Samples heard by ``now``: handed to the device and past its latency."""
        with self._lock:
            self._advance(now)
            return self._heard

    def in_flight(self, now: float) -> int:
        """Samples not yet heard: buffered here or still in the device's pipeline."""
        with self._lock:
            self._advance(now)
            return self._size + self._handed - self._heard

    def _advance(self, now: float) -> None:
        while self._pending and self._pending[0][0] <= now:
            self._heard = self._pending.popleft()[1]

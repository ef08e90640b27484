"""Discard audio, optionally at the pace of a real speaker."""

from __future__ import annotations

import time

import anyio

from ..vocab.audio import AudioChunk
from .speaker import BLOCK_SECONDS

BLOCK_NS = round(BLOCK_SECONDS * 1e9)


class NullSink:
    """Throws audio away and counts it.

    With ``realtime=True`` it plays into nothing like a speaker with no device: a
    clock stands in for the device's callback, which takes audio from a buffer
    of ``buffer_seconds`` (the speaker's 0.5 s) at real-time pace, block by
    block (``BLOCK_SECONDS``, ticking from ``open``), and ``write`` waits while
    the buffer is full. So, as on a speaker, a write returns once its end fits
    in the buffer, audio written to an idle sink starts playing at the clock's
    next block (``first_played_ns``), ``played_seconds`` counts only audio whose
    playing time has passed, ``drain`` waits for the end and ``stop`` discards
    the rest. It stands in for a speaker in tests and benchmarks; it has no
    output latency.

    With ``realtime=False`` (the default) it takes audio as fast as it comes:
    everything written counts as played at once, and ``first_played_ns`` is the
    utterance's first ``write``.
    """

    def __init__(
        self, sample_rate: int = 24000, realtime: bool = False, buffer_seconds: float = 0.5
    ) -> None:
        if buffer_seconds <= BLOCK_SECONDS:
            raise ValueError(f"buffer_seconds must exceed {BLOCK_SECONDS}, got {buffer_seconds}")
        self.name = "null"
        self.sample_rate = sample_rate
        self.realtime = realtime
        self.buffer_seconds = buffer_seconds
        # The clock, in perf_counter_ns; the times are those of a device that takes
        # every sample the moment it is due.
        self._opened_ns = 0
        self._ends_ns = 0  # when the audio written so far has finished playing
        self._written = 0.0  # seconds written and not discarded
        self._played = 0.0
        self._utterance_open = False
        self._first_ns: int | None = None  # may lie ahead: the block it starts in

    async def open(self) -> None:
        self._opened_ns = self._ends_ns = time.perf_counter_ns()
        self._written = self._played = 0.0
        self._utterance_open = False
        self._first_ns = None

    async def write(self, chunk: AudioChunk) -> None:
        now = time.perf_counter_ns()
        if not self._utterance_open:
            self._utterance_open = True
            self._first_ns = None
        self._written += chunk.seconds
        if not self.realtime:
            if self._first_ns is None:
                self._first_ns = now
            return
        start = self._ends_ns
        if start <= now:  # idle (a new utterance, or an underrun): the next block takes it
            start = now + (self._opened_ns - now) % BLOCK_NS
        if self._first_ns is None:
            self._first_ns = start
        self._ends_ns = start + round(chunk.seconds * 1e9)
        # Backpressure: wait until the end of this audio fits in the buffer.
        await anyio.sleep(max(0.0, (self._ends_ns - now) / 1e9 - self.buffer_seconds))

    async def drain(self) -> None:
        if self.realtime:
            await anyio.sleep(max(0.0, (self._ends_ns - time.perf_counter_ns()) / 1e9))
        self._utterance_open = False

    async def stop(self) -> None:
        now = time.perf_counter_ns()
        self._written = self.played_seconds
        self._ends_ns = min(self._ends_ns, now)
        if self._first_ns is not None and self._first_ns > now:
            self._first_ns = None  # discarded before its block came
        self._utterance_open = False

    @property
    def played_seconds(self) -> float:
        if self.realtime:
            pending = max(0, self._ends_ns - time.perf_counter_ns()) / 1e9
            self._played = max(self._played, self._written - pending)
        else:
            self._played = self._written
        return self._played

    @property
    def first_played_ns(self) -> int | None:
        first = self._first_ns
        return first if first is not None and first <= time.perf_counter_ns() else None

    async def aclose(self) -> None:
        await self.stop()

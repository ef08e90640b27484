"""Discard audio, optionally at the pace of a real speaker."""

from __future__ import annotations

import time

import anyio

from ..vocab.audio import AudioChunk
from .clock import PlaybackClock
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
        # Stands in for the device: its callback takes a block at a time.
        self._clock = PlaybackClock(BLOCK_NS)

    async def open(self) -> None:
        self._clock.open()

    async def write(self, chunk: AudioChunk) -> None:
        now = time.perf_counter_ns()
        self._clock.begin_write()
        if not self.realtime:
            self._clock.play_at_once(chunk.seconds, now)
            return
        self._clock.play(chunk.seconds, now)
        # Backpressure: wait until the end of this audio fits in the buffer (a
        # paused device takes nothing: a full buffer then waits for the resume).
        clock = self._clock
        while (ahead_s := (clock.ends_ns - clock.now()) / 1e9 - self.buffer_seconds) > 0:
            if clock.paused:
                await clock.wait_resumed()
            else:
                await anyio.sleep(ahead_s)

    async def drain(self) -> None:
        if self.realtime:
            await self._clock.wait_played()
        else:
            self._clock.end_utterance()

    async def stop(self) -> None:
        self._clock.stop()

    def pause(self) -> bool:
        if self.realtime:
            self._clock.pause()
        return self.realtime

    def resume(self) -> None:
        self._clock.resume()

    @property
    def played_seconds(self) -> float:
        return self._clock.played_seconds

    @property
    def first_played_ns(self) -> int | None:
        return self._clock.first_played_ns

    async def aclose(self) -> None:
        await self.stop()

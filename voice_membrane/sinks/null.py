"""Discard audio, optionally at the pace of a real speaker."""

from __future__ import annotations

import time

import anyio

from ..audio import AudioChunk


class NullSink:
    """Throws audio away and counts it.

    With ``realtime=True`` it behaves like a speaker with no buffer: each ``write``
    returns when its audio would have finished playing (an anyio sleep against a
    running deadline, so the total is never shorter than the audio), which makes
    it a stand-in for a speaker in tests and benchmarks. ``played_seconds`` then
    counts only audio whose playing time has passed; ``stop`` discards the rest.
    """

    def __init__(self, sample_rate: int = 24000, realtime: bool = False) -> None:
        self.name = "null"
        self.sample_rate = sample_rate
        self.realtime = realtime
        self._written = 0.0  # seconds written and not discarded
        self._ends_at = 0.0  # monotonic time the written audio finishes playing
        self._played = 0.0

    async def open(self) -> None:
        self._ends_at = time.monotonic()
        self._written = self._played = 0.0

    async def write(self, chunk: AudioChunk) -> None:
        self._written += chunk.seconds
        if not self.realtime:
            return
        now = time.monotonic()
        # A gap between writes is an underrun: playing restarts from now.
        self._ends_at = max(self._ends_at, now) + chunk.seconds
        await anyio.sleep(self._ends_at - now)

    async def drain(self) -> None:
        if self.realtime:
            await anyio.sleep(max(0.0, self._ends_at - time.monotonic()))

    async def stop(self) -> None:
        self._written = self.played_seconds
        self._ends_at = min(self._ends_at, time.monotonic())

    @property
    def played_seconds(self) -> float:
        pending = max(0.0, self._ends_at - time.monotonic()) if self.realtime else 0.0
        self._played = max(self._played, self._written - pending)
        return self._played

    async def aclose(self) -> None:
        await self.stop()

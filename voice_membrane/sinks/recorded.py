"""A sink that says, after each utterance, what of it was heard and when.

``RecordedSink`` wraps any ``AudioSink`` and passes everything on. It tells
its ``Recorder`` when an utterance begins (its first write: nothing of it
plays before) and, when it ends (``drain`` or ``stop``), the audio written,
how much of it the inner sink says was heard (``played_seconds``: for a
call, what the caller's marks confirmed; cut where an interruption cut it),
when it began to play and the pauses it was held for — all a recording needs
to lay the assistant's voice where the listener heard it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..vocab.audio import AudioChunk, Samples, resample
from .base import AudioSink


@dataclass(frozen=True, slots=True)
class HeardUtterance:
    """``samples`` (mono int16 at ``rate``): all that was written; its first
    ``heard_s`` were heard, from ``first_played_ns`` (``perf_counter_ns``; None:
    nothing played), held silent over each ``pauses`` (paused, resumed) span."""

    samples: Samples
    rate: int
    first_played_ns: int | None
    heard_s: float
    pauses: tuple[tuple[int, int], ...] = ()

    @property
    def heard(self) -> Samples:
        return self.samples[: round(self.heard_s * self.rate)]


class Recorder(Protocol):
    def began(self, at_ns: int) -> None:
        """An utterance's first write, at ``at_ns``: it plays from then at the earliest."""
        ...

    def heard(self, utterance: HeardUtterance) -> None: ...


class RecordedSink:
    def __init__(self, inner: AudioSink, recorder: Recorder) -> None:
        self.inner, self.recorder = inner, recorder
        self.name = inner.name
        self.sample_rate = inner.sample_rate
        self._chunks: list[Samples] = []
        self._played_before = 0.0  # the inner sink's played_seconds when this utterance began
        self._paused_ns: int | None = None
        self._pauses: list[tuple[int, int]] = []

    async def open(self) -> None:
        await self.inner.open()

    async def write(self, chunk: AudioChunk) -> None:
        samples = chunk.samples
        if chunk.sample_rate != self.sample_rate:  # as the inner sink will play it
            samples = resample(samples, chunk.sample_rate, self.sample_rate)
        if not self._chunks:
            self.recorder.began(time.perf_counter_ns())
        self._chunks.append(samples)
        await self.inner.write(chunk)

    async def drain(self) -> None:
        try:
            await self.inner.drain()
        finally:
            self._ended()

    async def stop(self) -> None:
        try:
            await self.inner.stop()
        finally:
            self._ended()

    def pause(self) -> bool:
        held = self.inner.pause()
        if held and self._paused_ns is None:
            self._paused_ns = time.perf_counter_ns()
        return held

    def resume(self) -> None:
        self.inner.resume()
        if self._paused_ns is not None:
            self._pauses.append((self._paused_ns, time.perf_counter_ns()))
            self._paused_ns = None

    @property
    def played_seconds(self) -> float:
        return self.inner.played_seconds

    @property
    def first_played_ns(self) -> int | None:
        return self.inner.first_played_ns

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _ended(self) -> None:
        played = self.inner.played_seconds
        if self._paused_ns is not None:  # (a stop ends a pause: held until the end)
            self._pauses.append((self._paused_ns, time.perf_counter_ns()))
        samples = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
        utterance = HeardUtterance(
            samples,
            self.sample_rate,
            self.inner.first_played_ns,
            max(0.0, played - self._played_before),
            tuple(self._pauses),
        )
        self._chunks, self._pauses, self._paused_ns = [], [], None
        self._played_before = played
        if len(samples):
            self.recorder.heard(utterance)

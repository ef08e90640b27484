"""An STT engine with a stopwatch on each stream: when ``finalize()`` was asked
and when the first final after it came (the engine's settling time, wall clock).

Used by ``bench --input`` only; the engine's behaviour is unchanged.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

from ..stt.base import SttEngine, SttStream, tell_paused
from ..vocab.audio import Samples
from ..vocab.transcripts import Transcript


class TimedStt:
    """``engine`` whose streams record ``settle_ms`` (finalize → first final after it)."""

    def __init__(self, engine: SttEngine) -> None:
        self.engine = engine
        self.name = engine.name
        self.sample_rate = engine.sample_rate
        self.local = engine.local
        self.settle_ms: list[float] = []  # one per stream that settled with a final

    async def start(self) -> None:
        await self.engine.start()

    def stream(self) -> SttStream:
        return _TimedStream(self.engine.stream(), self.settle_ms)

    async def aclose(self) -> None:
        await self.engine.aclose()


class _TimedStream:
    def __init__(self, inner: SttStream, out: list[float]) -> None:
        self._inner, self._out = inner, out
        self._asked_ns: int | None = None

    async def push(self, samples: Samples) -> None:
        await self._inner.push(samples)

    async def speech_paused(self, paused: bool) -> None:
        await tell_paused(self._inner, paused)

    async def finalize(self) -> None:
        if self._asked_ns is None:
            self._asked_ns = time.perf_counter_ns()
        await self._inner.finalize()

    async def transcripts(self) -> AsyncIterator[Transcript]:
        timed = False
        async for transcript in self._inner.transcripts():
            if transcript.final and self._asked_ns is not None and not timed:
                timed = True
                self._out.append(round((time.perf_counter_ns() - self._asked_ns) / 1e6, 3))
            yield transcript

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._inner.__aexit__(exc_type, exc, tb)

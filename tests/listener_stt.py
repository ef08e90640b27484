"""A local STT engine for the listener tests: each utterance's stream keeps
the sizes of the audio pushed to it and settles, when asked, to one final."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

import anyio

from voice_membrane.vocab.audio import Samples
from voice_membrane.vocab.transcripts import Transcript

RATE = 16_000
SAID = "What is the weather like in Paris today?"


class SaysWeatherStream:
    def __init__(self, pushed: list[int]) -> None:
        self._pushed = pushed
        self._settled = anyio.Event()

    async def push(self, samples: Samples) -> None:
        self._pushed.append(len(samples))

    async def finalize(self) -> None:
        self._settled.set()

    async def transcripts(self) -> AsyncIterator[Transcript]:
        await self._settled.wait()
        yield Transcript(SAID, True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        pass


class SaysWeather:
    name, sample_rate, local = "hello", RATE, True

    def __init__(self) -> None:
        self.pushed: list[int] = []  # the sizes of the pushes, all streams

    async def start(self) -> None:
        pass

    def stream(self) -> SaysWeatherStream:
        return SaysWeatherStream(self.pushed)

    async def aclose(self) -> None:
        pass

"""A local STT engine that knows what was said and when: each stream, asked to
settle, gives at once as its final the words of the speech spans that began
before the listener's current sample and no earlier stream gave.

For measuring turn-taking on a corpus whose spans are known (the turn bench,
``audio_fixtures/turns``): the turn decision then depends on the listener's
rules alone, not on how fast or how well a recogniser hears. ``clock`` is the
listener's sample count (``listener.vad.samples_fed``), set once the listener
is built.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Self

import anyio

from ..vocab.audio import Samples
from ..vocab.transcripts import Transcript


class SpanStream:
    def __init__(self, engine: SpanStt) -> None:
        self._engine = engine
        self._settled = anyio.Event()

    async def push(self, samples: Samples) -> None:
        pass

    async def speech_paused(self, paused: bool) -> None:
        pass

    async def finalize(self) -> None:
        self._settled.set()

    async def transcripts(self) -> AsyncIterator[Transcript]:
        await self._settled.wait()
        text = self._engine.take_words()
        if text:
            yield Transcript(text, True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        pass


class SpanStt:
    """``spans``: (first sample, words) of each stretch of speech, in order."""

    name, local = "spans", True

    def __init__(self, spans: Sequence[tuple[int, str]], sample_rate: int = 16_000) -> None:
        self.sample_rate = sample_rate
        self._spans = list(spans)
        self._said = 0  # spans given already
        self.clock: Callable[[], int] = lambda: 0

    def take_words(self) -> str:
        """The words of the spans begun by now that no stream gave yet."""
        now, begun = self.clock(), self._said
        while begun < len(self._spans) and self._spans[begun][0] < now:
            begun += 1
        words = [text for _, text in self._spans[self._said : begun] if text]
        self._said = begun
        return " ".join(words)

    @property
    def all_said(self) -> bool:
        """Every span's words were given (none was left unheard)."""
        return self._said == len(self._spans)

    async def start(self) -> None:
        pass

    def stream(self) -> SpanStream:
        return SpanStream(self)

    async def aclose(self) -> None:
        pass

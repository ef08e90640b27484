"""Drive one utterance through a speech-to-text engine as a listening loop would:
push the audio in chunks (faster than real time), ``finalize()``, read every
transcript — concurrently, as the SttStream protocol intends."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anyio
import numpy as np

from ..stt.base import SttEngine, SttError
from ..vocab.audio import Samples
from ..vocab.transcripts import Transcript


@dataclass(slots=True)
class Heard:
    """What one utterance gave: its transcripts in order, the error that ended it
    (None: it ended normally), and the wall time from ``finalize()`` to the
    last final (None without a final)."""

    transcripts: list[Transcript] = field(default_factory=list)
    error: SttError | None = None
    finalize_to_final_s: float | None = None

    @property
    def finals(self) -> list[Transcript]:
        return [t for t in self.transcripts if t.final]

    @property
    def partials(self) -> list[Transcript]:
        return [t for t in self.transcripts if not t.final]

    @property
    def text(self) -> str:
        return " ".join(t.text for t in self.finals)


def speech(seconds: float, rate: int = 16000) -> Samples:
    """A tone standing in for speech (the fakes count samples, not what they say)."""
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * 220 * t) * 8000).astype(np.int16)


async def drive(engine: SttEngine, audio: Samples, chunk: int = 320) -> Heard:
    """``audio`` through one stream of ``engine`` (started already)."""
    heard = Heard()
    finalized_at: list[float] = []
    try:
        async with engine.stream() as stream, anyio.create_task_group() as tg:

            async def feed() -> None:
                for at in range(0, len(audio), chunk):
                    await stream.push(audio[at : at + chunk])
                finalized_at.append(time.perf_counter())
                await stream.finalize()

            tg.start_soon(feed)
            async for transcript in stream.transcripts():
                heard.transcripts.append(transcript)
                if transcript.final and finalized_at:
                    heard.finalize_to_final_s = time.perf_counter() - finalized_at[0]
            tg.cancel_scope.cancel()  # the feeder may wait on a socket that is gone
    except* SttError as group:
        heard.error = group.exceptions[0]  # type: ignore[assignment]
    return heard

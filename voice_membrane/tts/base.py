"""The interface every TTS engine implements."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol

from ..audio import AudioChunk


class TtsError(RuntimeError):
    """The engine could not speak: missing program or model, crashed process, bad output."""


class TtsEngine(Protocol):
    """Turns text pieces into audio, one piece at a time.

    Lifecycle: ``await engine.start()`` once per session (loads the model or
    starts the process; slow engines pay their load time here, not per turn),
    then any number of ``synthesize`` calls, one at a time, then
    ``await engine.aclose()``.

    ``synthesize(text)`` yields the piece's audio as it is produced, first chunk
    as early as the engine allows. If the caller stops iterating early (a turn is
    interrupted and its task cancelled), the engine must stay usable for the next
    call and leak nothing (no thread, process or partial output left behind to
    pollute the next piece).
    """

    name: str
    sample_rate: int  # of the audio it yields

    async def start(self) -> None: ...

    def synthesize(self, text: str) -> AsyncGenerator[AudioChunk, None]: ...

    async def aclose(self) -> None: ...

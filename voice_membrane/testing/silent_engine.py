"""A TTS engine that says nothing, quickly: for measuring or testing what comes
before the voice (the model, the history) with no voice's time in the way."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import numpy as np

from ..tts.piece_stream import PieceEngine
from ..vocab.audio import AudioChunk


class SilentEngine(PieceEngine):
    """Every piece is 10 ms of silence."""

    name = "silent"
    sample_rate = 22050

    async def start(self) -> None:
        return None

    async def synthesize(
        self, text: str, previous_text: str = ""
    ) -> AsyncGenerator[AudioChunk, None]:
        yield AudioChunk(np.zeros(self.sample_rate // 100, dtype=np.int16), self.sample_rate)

    async def aclose(self) -> None:
        return None

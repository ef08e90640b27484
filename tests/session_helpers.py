"""Parts for sessions of many turns: a recorded reply, a source that keeps what it
was asked, and a TTS engine that answers every piece with a moment of silence
(so a hundred turns take a second, not a hundred espeak-ng runs)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path

from voice_membrane.providers.base import ChatMessage
from voice_membrane.providers.replay import ReplaySource

REPLY = (
    "The weather stays mild and dry today, with a light breeze in the afternoon "
    "and clear skies by evening."
)


def write_recording(path: Path, text: str = REPLY) -> Path:
    lines = [{"format": "voice-membrane-replay", "version": 1, "mode": "chat"}]
    lines += [{"t_ms": 0, "text": text[i : i + 7]} for i in range(0, len(text), 7)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


class AskedSource:
    """A recorded reply to every turn; keeps the conversation each turn was sent."""

    def __init__(self, recording: Path) -> None:
        self.replay = ReplaySource(recording, speed=0)
        self.name, self.mode = self.replay.name, self.replay.mode
        self.asked: list[list[ChatMessage]] = []

    async def start(self) -> None:
        await self.replay.start()

    async def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]:
        self.asked.append(list(messages))
        async for delta in self.replay.stream(messages):
            yield delta

    async def aclose(self) -> None:
        await self.replay.aclose()

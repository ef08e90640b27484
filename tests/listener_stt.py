"""A local STT engine for the listener tests: each utterance's stream keeps
the sizes of the audio pushed to it and settles, when asked, to one final; the
question it is made for, asked twice; what a listener said, less its clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import numpy as np
import soundfile as sf

from voice_membrane.pipeline.listening import (
    BargeIn,
    Heard,
    ListenItem,
    SpeechBegan,
    SpeechEnded,
    UserTurn,
)
from voice_membrane.vocab.audio import Samples
from voice_membrane.vocab.transcripts import Transcript

RATE = 16_000
SAID = "What is the weather like in Paris today?"


class SaysWeatherStream:
    def __init__(self, pushed: list[int], hints: list[str]) -> None:
        self._pushed = pushed
        self._hints = hints
        self._settled = anyio.Event()

    async def push(self, samples: Samples) -> None:
        self._pushed.append(len(samples))

    async def speech_paused(self, paused: bool) -> None:
        self._hints.append("paused" if paused else "resumed")

    async def finalize(self) -> None:
        if not self._settled.is_set():
            self._hints.append("finalize")
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
        self.hints: list[str] = []  # "paused", "resumed", "finalize", all streams

    async def start(self) -> None:
        pass

    def stream(self) -> SaysWeatherStream:
        return SaysWeatherStream(self.pushed, self.hints)

    async def aclose(self) -> None:
        pass


def asked_twice() -> Samples:
    """weather.wav twice, between stretches of silence (RATE)."""
    path = Path(__file__).resolve().parent.parent / "audio_fixtures" / "listening" / "weather.wav"
    audio, rate = sf.read(path, dtype="int16")
    assert rate == RATE
    silence = np.zeros(RATE, np.int16)
    return np.concatenate([silence[: RATE // 2], audio, silence, audio, silence])


def heard(items: list[ListenItem]) -> list[Any]:
    """What the listener said, less the wall-clock times."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, UserTurn):
            out.append(("turn", item.text, item.reason))
        elif isinstance(item, SpeechBegan | SpeechEnded | BargeIn):
            out.append(item)
        elif isinstance(item, Heard):
            out.append(("heard", item.transcript.text, item.transcript.final))
        else:
            out.append(type(item).__name__)
    return out

"""A recognizer slower than the input (a file fed faster than it decodes, a
process whose CPU the reply takes): every question's final comes after the
last question was heard. Each question is still its own turn, in order; none
is lost, none is glued to another."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Self

import anyio
import numpy as np
import soundfile as sf
from listener_stt import RATE

from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.engines import make_vad
from voice_membrane.listening.settings import EndpointSettings, VadSettings
from voice_membrane.pipeline.listening import Listener, ListenItem, UserTurn
from voice_membrane.sources.base import Frame
from voice_membrane.vocab.audio import Samples
from voice_membrane.vocab.transcripts import Transcript

QUESTIONS = 3
FIXTURES = Path(__file__).resolve().parent.parent / "audio_fixtures"


class DecodesLate:
    """Stream n's final ("question n") comes once all ``QUESTIONS`` streams
    were asked to settle: after the input's last question was heard."""

    name, sample_rate, local = "late", RATE, True

    def __init__(self) -> None:
        self.settled = 0
        self.all_settled = anyio.Event()

    async def start(self) -> None:
        pass

    def stream(self) -> _LateStream:
        return _LateStream(self)

    async def aclose(self) -> None:
        pass


class _LateStream:
    def __init__(self, engine: DecodesLate) -> None:
        self._engine = engine
        self._number = 0

    async def push(self, samples: Samples) -> None:
        pass

    async def finalize(self) -> None:
        engine = self._engine
        engine.settled += 1
        self._number = engine.settled
        if engine.settled == QUESTIONS:
            engine.all_settled.set()

    async def transcripts(self) -> AsyncIterator[Transcript]:
        await self._engine.all_settled.wait()
        await anyio.sleep(0.01 * self._number)  # (in the order they were asked)
        yield Transcript(f"question {self._number}", True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        pass


def test_finals_that_all_come_after_the_last_question_give_a_turn_each() -> None:
    # three questions 1 s apart (each closes by final_wait_s with no final
    # yet, the next is open when its final comes), then 0.5 s of silence: the
    # last is still settling when the input ends
    said = sf.read(FIXTURES / "listening" / "weather.wav", dtype="int16")[0]
    gap, tail = np.zeros(RATE, np.int16), np.zeros(RATE // 2, np.int16)
    audio = np.concatenate([gap[: RATE // 2], said, gap, said, gap, said, tail])

    async def frames() -> AsyncIterator[Frame]:
        for i in range(0, len(audio), 320):  # as fast as they go
            yield Frame(audio[i : i + 320], RATE, i, 0)

    async def go() -> list[ListenItem]:
        endpoint = EndpointSettings(preemptive=False)
        listener = Listener(
            make_vad(VadSettings(), RATE), DecodesLate(), Endpointer(endpoint, RATE)
        )
        send, receive = anyio.create_memory_object_stream[ListenItem](1000)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.run, frames(), send)
                async with receive:
                    items = [item async for item in receive]
        return items

    turns = [item.text for item in anyio.run(go) if isinstance(item, UserTurn)]
    assert turns == [f"question {n}" for n in range(1, QUESTIONS + 1)]


class SecondStretchLate:
    """Two stretches of speech, one utterance: the first's final comes at once,
    the second's only after the turn was taken (a recogniser slower than the
    final wait)."""

    name, sample_rate, local = "late", RATE, True

    def __init__(self) -> None:
        self.streams = 0
        self.turn_taken = anyio.Event()

    async def start(self) -> None:
        pass

    def stream(self) -> _StretchStream:
        self.streams += 1
        return _StretchStream(self, self.streams)

    async def aclose(self) -> None:
        pass


class _StretchStream(_LateStream):
    def __init__(self, engine: SecondStretchLate, number: int) -> None:
        self._stretch, self._number = engine, number
        self._finalized = anyio.Event()

    async def finalize(self) -> None:
        self._finalized.set()

    async def transcripts(self) -> AsyncIterator[Transcript]:
        await self._finalized.wait()
        if self._number == 2:
            await self._stretch.turn_taken.wait()
        yield Transcript("What is the weather" if self._number == 1 else "in Paris today?", True)


def test_a_final_that_comes_after_its_utterances_turn_is_a_turn_of_its_own() -> None:
    # "what is the weather … [0.3 s] … in Paris today": the turn closes by the
    # final wait with the first stretch's words; the second's come after it
    said = sf.read(FIXTURES / "listening" / "weather.wav", dtype="int16")[0]
    pause, tail = np.zeros(round(0.3 * RATE), np.int16), np.zeros(3 * RATE, np.int16)
    audio = np.concatenate([pause, said, pause, said, tail])
    engine = SecondStretchLate()

    async def frames() -> AsyncIterator[Frame]:
        for i in range(0, len(audio), 320):  # as fast as they go
            yield Frame(audio[i : i + 320], RATE, i, 0)
            await anyio.sleep(0)

    async def go() -> list[str]:
        endpoint = EndpointSettings(preemptive=False)
        listener = Listener(make_vad(VadSettings(), RATE), engine, Endpointer(endpoint, RATE))
        send, receive = anyio.create_memory_object_stream[ListenItem](1000)
        heard: list[str] = []
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.run, frames(), send)
                async with receive:
                    async for item in receive:
                        if isinstance(item, UserTurn):
                            heard.append(f"{item.reason}: {item.text}")
                            engine.turn_taken.set()
        return heard

    heard = anyio.run(go)
    assert engine.streams == 2
    assert heard == ["final_timeout: What is the weather", "late: in Paris today?"]

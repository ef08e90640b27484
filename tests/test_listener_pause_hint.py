"""The listener tells the STT stream when the detector hears the user stop and
go on (``SttStream.speech_paused``), so an engine can settle at the pause,
before the stop is confirmed and ``finalize()`` comes."""

from __future__ import annotations

import wave
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import numpy as np
from listener_stt import RATE, SaysWeather, SaysWeatherStream, asked_twice

from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.engines import make_vad
from voice_membrane.listening.settings import EndpointSettings, VadSettings
from voice_membrane.pipeline.listening import Listener, ListenItem, UserTurn
from voice_membrane.sources.base import Frame
from voice_membrane.vocab.audio import Samples

SPEECH = Path(__file__).resolve().parent.parent / "audio_fixtures" / "speech"


def _hints(audio: Samples, frame: int = 320, engine: SaysWeather | None = None) -> list[str]:
    async def frames() -> AsyncIterator[Frame]:
        for i in range(0, len(audio), frame):
            yield Frame(audio[i : i + frame], RATE, i, 0)

    async def go() -> list[str]:
        nonlocal engine
        engine = engine or SaysWeather()
        endpoint = EndpointSettings(end_silence_s=0.6, preemptive=False)
        listener = Listener(make_vad(VadSettings(), RATE), engine, Endpointer(endpoint, RATE))
        send, receive = anyio.create_memory_object_stream[ListenItem](1000)
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.run, frames(), send)
                async with receive:
                    async for item in receive:
                        if isinstance(item, UserTurn):
                            engine.hints.append("turn")
        return engine.hints

    return anyio.run(go)


def test_each_stream_hears_of_the_pause_before_it_is_finalized() -> None:
    assert _hints(asked_twice()) == ["paused", "finalize", "turn"] * 2


class Unhinted(SaysWeatherStream):
    speech_paused = None  # type: ignore[assignment]  # an engine from before the hint


class OldEngine(SaysWeather):
    def stream(self) -> SaysWeatherStream:
        return Unhinted(self.pushed, self.hints)


def test_a_stream_without_the_hint_is_never_told_and_hears_as_before() -> None:
    assert _hints(asked_twice(), engine=OldEngine()) == ["finalize", "turn"] * 2


def test_speech_that_goes_on_before_the_stop_is_confirmed_is_told_too() -> None:
    with wave.open(str(SPEECH / "questions" / "weather_paris.wav")) as reader:
        question = np.frombuffer(reader.readframes(reader.getnframes()), "<i2").astype(np.int16)
    said = question[round(0.3 * RATE) : round(2.1 * RATE)]  # the words, no silence around
    gap = np.zeros(round(0.12 * RATE), np.int16)  # shorter than min_silence_s (0.2)
    silence = np.zeros(RATE, np.int16)
    hints = _hints(np.concatenate([silence, said, gap, said, silence]))
    assert hints[-3:] == ["paused", "finalize", "turn"]
    assert "resumed" in hints and hints.count("finalize") == 1
    # alternating: a resume only after a pause
    told = [h for h in hints if h not in ("finalize", "turn")]
    assert told == ["paused", "resumed"] * (len(told) // 2) + ["paused"]

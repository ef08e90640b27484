"""The end of a turn is decided when its silence is over by the audio's clock,
not when the next frame happens to come: a client whose audio stops (a stalled
network, a muted browser tab that stops sending) still gets its turn ended."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import numpy as np
import soundfile as sf
from listener_stt import RATE, SaysWeather

from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.engines import make_vad
from voice_membrane.listening.settings import EndpointSettings, VadSettings
from voice_membrane.pipeline.listening import Listener, ListenItem, UserTurn
from voice_membrane.sources.base import Frame

ROOT = Path(__file__).resolve().parent.parent
FRAME = 320  # 20 ms


def test_a_turn_ends_on_time_when_the_audio_stops_coming() -> None:
    audio, rate = sf.read(ROOT / "audio_fixtures" / "listening" / "weather.wav", dtype="int16")
    assert rate == RATE
    audio = np.concatenate([np.zeros(RATE // 2, np.int16), audio, np.zeros(RATE // 4, np.int16)])

    async def frames() -> AsyncIterator[Frame]:
        start = time.perf_counter_ns()
        for i in range(0, len(audio), FRAME):
            due = start + round((i + FRAME) * 1e9 / RATE)
            await anyio.sleep(max(0.0, (due - time.perf_counter_ns()) / 1e9))
            yield Frame(audio[i : i + FRAME], RATE, i, time.perf_counter_ns())
        await anyio.sleep_forever()  # the client is still there, its audio is not

    async def go() -> list[ListenItem]:
        endpoint = EndpointSettings(end_silence_s=0.6, preemptive=False)
        listener = Listener(
            make_vad(VadSettings(), RATE), SaysWeather(), Endpointer(endpoint, RATE)
        )
        send, receive = anyio.create_memory_object_stream[ListenItem](100)
        items: list[ListenItem] = []
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.run, frames(), send)
                async with receive:
                    async for item in receive:
                        items.append(item)
                        if isinstance(item, UserTurn):
                            break
                tg.cancel_scope.cancel()
        return items

    items = anyio.run(go)  # without the clock: no turn, and a timeout
    (turn,) = [item for item in items if isinstance(item, UserTurn)]
    assert turn.text.startswith("What is the weather")
    assert turn.reason == "final"
    # decided by the clock: 0.6 s after the detector's speech end, well after
    # the last frame (0.25 s of silence) came
    assert (turn.decided_ns - turn.speech_end_ns) / 1e6 >= 590

"""A listener behind real time (an overloaded process) hears the frames queued
behind the one it takes as one frame: what it hears and decides does not
change, only the number of passes it makes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from listener_stt import RATE, SaysWeather

from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.engines import make_vad
from voice_membrane.listening.settings import EndpointSettings, VadSettings
from voice_membrane.pipeline import listening
from voice_membrane.pipeline.listening import (
    BargeIn,
    Heard,
    Listener,
    ListenItem,
    SpeechBegan,
    SpeechEnded,
    UserTurn,
)
from voice_membrane.sources.base import Frame
from voice_membrane.vocab.audio import Samples

ROOT = Path(__file__).resolve().parent.parent


def _audio() -> Samples:
    audio, rate = sf.read(ROOT / "audio_fixtures" / "listening" / "weather.wav", dtype="int16")
    assert rate == RATE
    silence = np.zeros(RATE, np.int16)
    return np.concatenate([silence[: RATE // 2], audio, silence, audio, silence])


def _listen(audio: Samples, frame: int) -> tuple[list[ListenItem], list[int]]:
    """Every frame at once (a file read as fast as it goes: the listener always
    has frames queued), then the input ends."""

    async def frames() -> AsyncIterator[Frame]:
        for i in range(0, len(audio), frame):
            yield Frame(audio[i : i + frame], RATE, i, 0)

    async def go() -> tuple[list[ListenItem], list[int]]:
        engine = SaysWeather()
        endpoint = EndpointSettings(end_silence_s=0.6, preemptive=False)
        listener = Listener(make_vad(VadSettings(), RATE), engine, Endpointer(endpoint, RATE))
        send, receive = anyio.create_memory_object_stream[ListenItem](1000)
        items: list[ListenItem] = []
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.run, frames(), send)
                async with receive:
                    async for item in receive:
                        items.append(item)
        return items, engine.pushed

    return anyio.run(go)


def _heard(items: list[ListenItem]) -> list[Any]:
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


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=st.sampled_from([160, 320, 480, 512, 1000]))
def test_queued_frames_heard_together_decide_as_one_at_a_time(frame: int) -> None:
    audio = _audio()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(listening, "MERGE_QUEUED_S", 0.0)
        one_by_one, pushed_one_by_one = _listen(audio, frame)
    merged, pushed_merged = _listen(audio, frame)
    assert _heard(merged) == _heard(one_by_one)
    assert [type(i) for i in merged].count(UserTurn) == 2
    # The STT got the same audio, in fewer pushes (frames taken together).
    assert sum(pushed_merged) == sum(pushed_one_by_one)
    assert len(pushed_merged) < len(pushed_one_by_one)

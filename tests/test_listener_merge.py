"""A listener behind real time (an overloaded process) hears the frames queued
behind the one it takes as one frame: what it hears and decides does not
change, only the number of passes it makes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from listener_stt import RATE, SaysWeather, asked_twice, heard

from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.engines import make_vad
from voice_membrane.listening.settings import EndpointSettings, VadSettings
from voice_membrane.pipeline import listening
from voice_membrane.pipeline.listening import (
    Listener,
    ListenItem,
    UserTurn,
)
from voice_membrane.sources.base import Frame
from voice_membrane.vocab.audio import Samples


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


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=st.sampled_from([160, 320, 480, 512, 1000]))
def test_queued_frames_heard_together_decide_as_one_at_a_time(frame: int) -> None:
    audio = asked_twice()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(listening, "MERGE_QUEUED_S", 0.0)
        one_by_one, pushed_one_by_one = _listen(audio, frame)
    merged, pushed_merged = _listen(audio, frame)
    assert heard(merged) == heard(one_by_one)
    assert [type(i) for i in merged].count(UserTurn) == 2
    # The STT got the same audio, in fewer pushes (frames taken together).
    assert sum(pushed_merged) == sum(pushed_one_by_one)
    assert len(pushed_merged) < len(pushed_one_by_one)

"""Frames put straight into a listener's queue (``FrameInlet``, a served
session's path): the listener hears what it would from an async iterator of
the same frames, whenever they are put; a full queue loses frames and counts
them; the end of input comes after every frame put before ``close``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from listener_stt import RATE, SaysWeather, asked_twice, heard

from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.engines import make_vad
from voice_membrane.listening.settings import EndpointSettings, VadSettings
from voice_membrane.pipeline.listening import FrameInlet, Listener, ListenItem
from voice_membrane.sources.base import Frame

FRAME = 320  # 20 ms


def _listener() -> Listener:
    endpoint = EndpointSettings(end_silence_s=0.6, preemptive=False)
    return Listener(make_vad(VadSettings(), RATE), SaysWeather(), Endpointer(endpoint, RATE))


def _frames(count: int) -> list[Frame]:
    audio = asked_twice()
    return [Frame(audio[i : i + FRAME], RATE, i, 0) for i in range(0, count * FRAME, FRAME)]


async def _run(listener: Listener, source: AsyncIterator[Frame] | FrameInlet) -> list[ListenItem]:
    send, receive = anyio.create_memory_object_stream[ListenItem](1000)
    items: list[ListenItem] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.run, source, send)
        async with receive:
            async for item in receive:
                items.append(item)
    return items


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(early=st.integers(0, 40), bursts=st.lists(st.integers(1, 30), min_size=1, max_size=20))
def test_an_inlet_is_heard_as_an_iterator_of_the_same_frames(early: int, bursts: list[int]) -> None:
    frames = _frames(len(asked_twice()) // FRAME)

    async def iterate() -> AsyncIterator[Frame]:
        for frame in frames:
            yield frame

    async def through_inlet() -> list[ListenItem]:
        inlet = FrameInlet(256)
        for frame in frames[:early]:  # before the listener runs
            inlet.put(frame)
        rest = iter(frames[early:])

        async def produce() -> None:
            for size in [*bursts] * len(frames):
                batch = [f for _, f in zip(range(size), rest, strict=False)]
                if not batch:
                    break
                for frame in batch:
                    inlet.put(frame)
                await anyio.sleep(0.001)  # the socket's next read
            inlet.close()

        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            items = await _run(_listener(), inlet)
        assert inlet.dropped == 0
        return items

    async def main() -> tuple[list[ListenItem], list[ListenItem]]:
        with anyio.fail_after(60):
            return await _run(_listener(), iterate()), await through_inlet()

    expected, got = anyio.run(main)
    assert heard(got) == heard(expected)
    assert "UserTurn" in [type(item).__name__ for item in got]


def test_a_full_queue_loses_frames_and_counts_them() -> None:
    # silence: nothing but the frames goes through the listener's queue
    frames = [Frame(np.zeros(FRAME, np.int16), RATE, i * FRAME, 0) for i in range(400)]
    listener = _listener()

    async def main() -> None:
        inlet = FrameInlet(100)
        for frame in frames[:120]:  # 20 over the backlog held before the listener runs
            inlet.put(frame)
        assert inlet.dropped == 20
        async with anyio.create_task_group() as tg:

            async def produce() -> None:
                while listener.vad.samples_fed < 100 * FRAME:  # it took the first 100
                    await anyio.sleep(0.01)
                # 280 at once, with no pass of the loop between: the first to
                # the listener waiting for it, 256 to its queue, the rest lost
                for frame in frames[120:]:
                    inlet.put(frame)
                inlet.close()
                inlet.put(frames[0])  # after the end: ignored

            tg.start_soon(produce)
            with anyio.fail_after(30):
                await _run(listener, inlet)
        assert inlet.dropped == 20 + (280 - 1 - 256)

    anyio.run(main)
    assert listener.vad.samples_fed == (100 + 1 + 256) * FRAME


def test_an_inlet_closed_before_any_frame_ends_the_input() -> None:
    async def main() -> list[ListenItem]:
        inlet = FrameInlet(10)
        inlet.close()
        with anyio.fail_after(10):
            return await _run(_listener(), inlet)

    assert anyio.run(main) == []


def test_the_end_is_after_the_last_frame_put() -> None:
    listener = _listener()
    frames = _frames(10)

    async def main() -> None:
        inlet = FrameInlet(10)
        for frame in frames:
            inlet.put(frame)
        inlet.close()
        await _run(listener, inlet)

    anyio.run(main)
    assert listener.vad.samples_fed == 10 * FRAME

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
from voice_membrane.listening.vad import SpeechEnd
from voice_membrane.pipeline.listening import Listener, ListenItem, UserTurn
from voice_membrane.sources.base import Frame

ROOT = Path(__file__).resolve().parent.parent
FRAME = 320  # 20 ms
ENDPOINT = EndpointSettings(end_silence_s=0.6, preemptive=False)


def question(silence_after: int) -> np.ndarray:
    """weather.wav after half a second of silence, ``silence_after`` samples after it."""
    audio, rate = sf.read(ROOT / "audio_fixtures" / "listening" / "weather.wav", dtype="int16")
    assert rate == RATE
    silence = np.zeros(RATE // 2, np.int16)
    return np.concatenate([silence, audio, np.zeros(silence_after, np.int16)])


def listener() -> Listener:
    return Listener(make_vad(VadSettings(), RATE), SaysWeather(), Endpointer(ENDPOINT, RATE))


def heard_until_turn(listening: Listener, frames: AsyncIterator[Frame]) -> list[ListenItem]:
    """What ``listening`` says of ``frames`` up to its first turn (20 s at most)."""

    async def go() -> list[ListenItem]:
        send, receive = anyio.create_memory_object_stream[ListenItem](100)
        items: list[ListenItem] = []
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listening.run, frames, send)
                async with receive:
                    async for item in receive:
                        items.append(item)
                        if isinstance(item, UserTurn):
                            break
                tg.cancel_scope.cancel()
        return items

    return anyio.run(go)


def test_a_turn_ends_on_time_when_the_audio_stops_coming() -> None:
    audio = question(RATE // 4)

    async def frames() -> AsyncIterator[Frame]:
        start = time.perf_counter_ns()
        for i in range(0, len(audio), FRAME):
            due = start + round((i + FRAME) * 1e9 / RATE)
            await anyio.sleep(max(0.0, (due - time.perf_counter_ns()) / 1e9))
            yield Frame(audio[i : i + FRAME], RATE, i, time.perf_counter_ns())
        await anyio.sleep_forever()  # the client is still there, its audio is not

    items = heard_until_turn(listener(), frames())  # without the clock: a timeout
    (turn,) = [item for item in items if isinstance(item, UserTurn)]
    assert turn.text.startswith("What is the weather")
    assert turn.reason == "silence"
    # decided by the clock: 0.6 s after the detector's speech end, well after
    # the last frame (0.25 s of silence) came
    assert (turn.decided_ns - turn.speech_end_ns) / 1e6 >= 590


def test_a_deadline_just_past_a_live_frame_waits_for_no_more_audio() -> None:
    """A live source's frame that ends one sample short of the turn's end (a
    phone call's audio doubled to 16 kHz lags one sample) was handled after
    that sample was due: the end of the turn must come on the clock then, not
    wait for the next frame (here it comes 2 s later; before: a frame's
    length, 20 ms, on every such turn of a call)."""
    audio = question(RATE * 2)
    # The turn's end: the end silence after the detector's speech end (the
    # detector decides by the audio alone; the STT's final comes at once).
    ends = [e for e in make_vad(VadSettings(), RATE).feed(audio) if isinstance(e, SpeechEnd)]
    deadline = ends[0].at_sample + round(ENDPOINT.end_silence_s * RATE)
    stalled_ns: list[int] = []  # when the source held back its next frame

    async def frames() -> AsyncIterator[Frame]:
        start = time.perf_counter_ns()
        i = 0
        while i < len(audio):
            size = deadline - 1 - i if i < deadline - 1 < i + FRAME else FRAME
            short = i + size == deadline - 1
            # Handed on at the audio's pace, the short frame 10 ms early (a client
            # a little ahead of real time): so it is in before the last frame's
            # timer for the deadline, however late this loop wakes.
            handed = start + round((i + size) * 1e9 / RATE) - (10_000_000 if short else 0)
            await anyio.sleep(max(0.0, (handed - time.perf_counter_ns()) / 1e9))
            if short:  # the source holds back what follows
                stalled_ns.append(time.perf_counter_ns())
            # captured a millisecond before it is handed on (so the deadline just
            # past the short frame was due before the listener took it)
            yield Frame(audio[i : i + size], RATE, i, handed - 1_000_000)
            i += size
            if short:
                await anyio.sleep(2.0)  # the next frame comes late

    (turn,) = [
        item for item in heard_until_turn(listener(), frames()) if isinstance(item, UserTurn)
    ]
    assert turn.reason == "silence"
    assert stalled_ns, "the source never cut a frame short of the deadline"
    # decided while the source held its next frame back, not when it came
    assert turn.decided_ns - stalled_ns[0] < 2e9 * 0.5


def test_a_source_is_live_when_its_frames_come_at_the_audio_pace() -> None:
    from voice_membrane.pipeline.listening import SourcePace

    def judged(gap_ns: int, pairs: bool = False) -> bool:
        pace = SourcePace()
        now = 0
        for i in range(0, 40 * FRAME, FRAME):
            # (pairs: two frames in one socket read, the pair on time)
            now += (0 if i % (2 * FRAME) else 2 * gap_ns) if pairs else gap_ns
            pace.note(Frame(np.zeros(FRAME, np.int16), RATE, i, now))
        return pace.live

    assert judged(20_000_000)  # 20 ms frames every 20 ms
    assert judged(20_000_000, pairs=True)
    assert judged(12_000_000)  # a client a little ahead of real time
    assert not judged(50_000)  # a file read as fast as it goes
    assert not judged(0)  # made-up capture times

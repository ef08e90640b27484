"""The echo canceller on real devices, as ``run --listen`` wires it: a private
PulseAudio server (testing/pulse.py) whose speaker is looped back into its
microphone (a real echo path, with the devices' own latencies and callback
timing), the speaker sink telling the canceller what it plays
(``SpeakerSink.on_played``) and the microphone's frames cleaned before the
detector (``EchoIntake``). A Piper answer played on the speaker pauses
nothing; without the canceller its echo pauses it. Deadlines are hang guards only."""

from __future__ import annotations

import anyio
import numpy as np
import pytest

from voice_membrane.bench.echo_bargein import RATE, answers
from voice_membrane.listening.aec_webrtc import webrtc_canceller
from voice_membrane.listening.decisions import PausePlayout
from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.engines import make_vad
from voice_membrane.listening.settings import EndpointSettings, VadSettings
from voice_membrane.pipeline.echo_intake import EchoIntake
from voice_membrane.pipeline.listen_build import CANCELLED_WARMUP_S
from voice_membrane.sinks.speaker import SpeakerSink
from voice_membrane.sources.microphone import MicrophoneSource
from voice_membrane.testing.pulse import PulseServer
from voice_membrane.vocab.audio import AudioChunk


@pytest.fixture(scope="module")
def looped(pulse: PulseServer) -> PulseServer:
    """The speaker heard by the microphone, 60 ms later."""
    pulse.microphone()
    pulse.pactl(
        "load-module",
        "module-loopback",
        f"source={pulse.sink}.monitor",
        "sink=vmic_feed",
        "latency_msec=60",
    )
    return pulse


async def _pauses_over_an_answer(cancel: bool) -> tuple[int, int]:
    reply = answers(1, sentences=2)[0]
    reply = (reply.astype(np.float64) * 10 ** (-10 / 20)).astype(np.int16)  # a -10 dB echo
    intake = EchoIntake(webrtc_canceller(RATE)) if cancel else None
    settings = EndpointSettings(echo="aec", echo_warmup_s=CANCELLED_WARMUP_S)
    vad, endpointer = make_vad(VadSettings(already_talking="user"), RATE), Endpointer(settings)
    sink = SpeakerSink(sample_rate=RATE)
    pauses = 0
    done = anyio.Event()

    async def speak() -> None:
        await anyio.sleep(0.5)
        endpointer.assistant_speaking(True, vad.samples_fed)
        await sink.write(AudioChunk(reply, RATE))
        await sink.drain()
        await anyio.sleep(0.3)  # its echo's tail
        done.set()

    await sink.open()
    if intake is not None:
        sink.on_played = intake.played
    try:
        with anyio.fail_after(30):
            async with MicrophoneSource(rate=RATE) as source, anyio.create_task_group() as tg:
                tg.start_soon(speak)
                async for frame in source.frames():
                    if intake is not None:
                        frame = intake.clean(frame)
                    decisions = [d for e in vad.feed(frame.samples) for d in endpointer.vad(e)]
                    pauses += sum(isinstance(d, PausePlayout) for d in decisions)
                    if done.is_set():
                        break
    finally:
        await sink.aclose()
    return pauses, 0 if intake is None else intake.canceller.far_samples


def test_an_answer_on_the_speaker_does_not_pause_itself(looped: PulseServer) -> None:
    pauses, far = anyio.run(_pauses_over_an_answer, True)
    assert far > 2 * RATE  # what the speaker played reached the canceller
    assert pauses == 0


def test_without_the_canceller_its_echo_pauses_it(looped: PulseServer) -> None:
    assert anyio.run(_pauses_over_an_answer, False)[0] > 0

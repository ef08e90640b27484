"""The echo canceller in front of the detector (listening/echo_canceller.py):
the reply's own audio heard back at -20 and -10 dB, 20 to 200 ms late, with a
little reverb, never pauses it (50 answers); a user at 0 dB over it pauses it
0.5, 1.5 and 4 s into the answer (no warm-up). Offline, dated by samples
(voice_membrane/bench/echo_bargein.py): the canceller, Silero and the
endpointer as ``run --listen`` chains them, without the LLM or the STT."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import numpy as np
import pytest

from voice_membrane.bench.echo_bargein import (
    PATHS,
    RATE,
    answers,
    onset_latency_ms,
    session,
    timeline,
)
from voice_membrane.listening.aec_webrtc import WebRtcEcho, webrtc_canceller
from voice_membrane.listening.echo_canceller import EchoCanceller
from voice_membrane.listening.settings import EndpointSettings
from voice_membrane.pipeline import echo_intake
from voice_membrane.pipeline.config import ConfigError, PipelineConfig
from voice_membrane.pipeline.echo_intake import EchoIntake, Where, cancels_echo
from voice_membrane.sources.base import Frame
from voice_membrane.testing.echo_room import speech_onset, user_voice
from voice_membrane.vocab.audio import Samples

# what run --listen gives the endpointer with the canceller on
CANCELLED = EndpointSettings(echo="aec", echo_warmup_s=0.0)
ANSWERS = 7  # per echo path: 8 paths, 56 answers


class _Recorder:
    """An engine that returns the near block and keeps the far blocks it got."""

    def __init__(self) -> None:
        self.far: list[Samples] = []

    def process(self, far: Samples, near: Samples) -> Samples:
        self.far.append(far.copy())
        return near


def _ns(sample: int, rate: int = RATE) -> int:
    return sample * 1_000_000_000 // rate


def test_far_audio_is_paired_with_the_microphone_block_captured_as_it_played() -> None:
    engine = _Recorder()
    canceller = EchoCanceller(RATE, engine)
    tone = np.arange(1, 321, dtype=np.int16)
    canceller.far(tone, RATE, _ns(480))  # plays from sample 480, 30 ms in
    out = canceller.near(np.ones(960, dtype=np.int16), _ns(960))
    assert len(out) == 960  # whole 10 ms blocks: nothing held back
    blocks = engine.far
    assert [int(b.any()) for b in blocks] == [0, 0, 0, 1, 1, 0]
    assert blocks[3][0] == 1 and blocks[4][-1] == 320


def test_dates_that_jitter_keep_a_stream_contiguous() -> None:
    engine = _Recorder()
    canceller = EchoCanceller(RATE, engine)
    ramp = np.arange(1, 1601, dtype=np.int16)
    for i in range(0, 1600, 160):  # each callback dated up to 2 ms off
        canceller.far(ramp[i : i + 160], RATE, _ns(i + (0 if i == 0 else 32 if i % 320 else -32)))
    canceller.near(np.zeros(1600, dtype=np.int16), _ns(1600))
    assert np.array_equal(np.concatenate(engine.far), ramp)


@pytest.mark.parametrize("steady", [True, False])
def test_a_device_callback_that_ran_late_keeps_its_stream_contiguous(steady: bool) -> None:
    """A sound card's blocks (``steady``) follow each other whatever their
    callback's date says (a loaded machine runs it late); audio sent to be
    played at a time (a call's) is placed there."""
    engine = _Recorder()
    canceller = EchoCanceller(RATE, engine)
    ramp = np.arange(1, 641, dtype=np.int16)
    canceller.far(ramp[:320], RATE, _ns(0), steady=steady)
    canceller.far(ramp[320:], RATE, _ns(320 + 1600), steady=steady)  # 100 ms late
    canceller.near(np.zeros(2560, dtype=np.int16), _ns(2560))
    far = np.concatenate(engine.far)
    if steady:
        assert np.array_equal(far[:640], ramp)
    else:
        assert np.array_equal(far[1920:2240], ramp[320:]) and not far[320:1920].any()


def test_far_audio_at_another_rate_is_resampled_and_odd_frames_carried() -> None:
    engine = _Recorder()
    canceller = EchoCanceller(RATE, engine)
    canceller.far(np.full(2205, 1000, dtype=np.int16), 22_050, _ns(0))  # 100 ms
    first = canceller.near(np.zeros(250, dtype=np.int16), _ns(250))
    second = canceller.near(np.zeros(250, dtype=np.int16), _ns(500))
    assert (len(first), len(second)) == (160, 320)  # a block's rest waits for the next call
    assert all(int(np.abs(b[:100]).min()) > 900 for b in engine.far[:3])


def test_a_rate_the_engine_cannot_take_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="22050 Hz is not one of"):
        EchoCanceller(22_050, _Recorder())


@pytest.mark.parametrize(("gain_db", "delay_ms"), PATHS)
def test_the_answers_own_echo_never_pauses_it(gain_db: float, delay_ms: int) -> None:
    heard = session(answers(ANSWERS), gain_db, delay_ms, webrtc_canceller(RATE), CANCELLED)
    assert heard.pauses == []


@pytest.mark.parametrize("into_s", [1.5, 4.0])
def test_in_headphones_a_user_over_the_answer_pauses_it_as_without_a_canceller(
    into_s: float,
) -> None:
    """No echo comes back: AEC3's suppressor, which never measures an echo
    path, would duck their words (it paused 388 and 480 ms after their onset);
    the canceller hands on the microphone's own audio once it hears no echo."""
    replies = answers(2)
    voice = user_voice(0.0, replies[0])
    into = round(into_s * RATE)
    latencies = [
        onset_latency_ms(
            session(replies, -120.0, 60, canceller, CANCELLED, user=(voice, 0, into)),
            voice,
            0,
            into,
        )
        for canceller in (webrtc_canceller(RATE), None)
    ]
    cancelled, raw = latencies
    assert raw is not None and cancelled is not None and cancelled <= raw + 40


class _LateMicrophone(EchoCanceller):
    """The canceller as a loaded machine feeds it: the player hands each block
    over ``LEAD`` before it plays (dated as it will play), and the
    microphone's frames come dated ``late_ms`` late (its first ones came late:
    its timeline runs late) until ``until``, then on time."""

    LEAD = RATE // 10

    def __init__(self, played: Samples, late_ms: int, until: int) -> None:
        super().__init__(RATE, WebRtcEcho(RATE))
        self.played, self.late_ns, self.until = played, late_ms * 1_000_000, until

    def far(self, samples: Samples, rate: int, at_ns: int, *, steady: bool = False) -> None:
        at = at_ns * RATE // 1_000_000_000 + self.LEAD
        if at == self.LEAD:
            super().far(self.played[:at], rate, 0)
        super().far(self.played[at : at + len(samples)], rate, _ns(at))

    def near(self, samples: Samples, end_ns: int) -> Samples:
        late = self.late_ns if end_ns < _ns(self.until) else 0
        return super().near(samples, end_ns + late)


@pytest.mark.parametrize(("gain_db", "delay_ms"), [(-20.0, 20), (-10.0, 60), (-10.0, 200)])
def test_a_microphone_found_late_mid_answer_keeps_the_echo_cancelled(
    gain_db: float, delay_ms: int
) -> None:
    """Its frames dated 40 ms earlier than their place from 2 s into the
    answer on: moving its timeline back there would change the echo's delay
    under AEC3, which had measured it, and the echo paused the answer (on a
    loaded machine's PulseAudio loopback, a move of 17 ms did);
    it stays where it was."""
    replies = answers(2)
    played, heard = timeline(replies)
    late = _LateMicrophone(played, 40, heard.answers[0][0] + 2 * RATE)
    assert session(replies, gain_db, delay_ms, late, CANCELLED).pauses == []


def test_a_microphone_timeline_far_too_late_moves_back() -> None:
    """250 ms late (past AEC3's reach with the echo's own delay): the
    microphone's audio is paired with the reference played as it was heard."""
    engine = _Recorder()
    canceller = EchoCanceller(RATE, engine)
    canceller.near(np.zeros(320, dtype=np.int16), _ns(320 + 4000))  # dated 250 ms late
    canceller.far(np.full(320, 7, dtype=np.int16), RATE, _ns(640))
    canceller.near(np.zeros(320, dtype=np.int16), _ns(640))  # on time: back
    canceller.near(np.zeros(320, dtype=np.int16), _ns(960))
    assert [int(b.max()) for b in engine.far] == [0, 0, 0, 0, 7, 7]


def test_without_the_canceller_that_echo_pauses_the_answer() -> None:
    """The control: the same echo, heard as it is, is speech to the detector."""
    heard = session(answers(2), -20.0, 120, None, CANCELLED)
    assert heard.paused_in(*heard.answers[0])


@pytest.mark.parametrize("into_s", [0.5, 1.5, 4.0])
@pytest.mark.parametrize(("gain_db", "delay_ms"), [(-20.0, 20), (-10.0, 200)])
def test_a_user_over_the_answer_pauses_it(gain_db: float, delay_ms: int, into_s: float) -> None:
    replies = answers(2)
    voice = user_voice(0.0, replies[0])
    into = round(into_s * RATE)
    heard = session(
        replies, gain_db, delay_ms, webrtc_canceller(RATE), CANCELLED, user=(voice, 0, into)
    )
    start, _ = heard.answers[0]
    onset = start + into + speech_onset(voice)
    assert heard.paused_in(start, onset) == []  # nothing before the user spoke
    latency = onset_latency_ms(heard, voice, 0, into)
    assert latency is not None and latency < 1000  # (by samples: the user's first second)


@pytest.mark.parametrize(
    ("mode", "where", "rate", "on"),
    [
        ("auto", "speaker", RATE, True),
        ("auto", "call", 8000, False),  # most phones cancel their own: opt in
        ("webrtc", "call", 8000, True),
        ("webrtc", "browser", RATE, False),  # getUserMedia cancels its own
        ("webrtc", "recording", RATE, False),
        ("none", "speaker", RATE, False),
        ("auto", "speaker", 22_050, False),  # not a rate WebRTC's module runs at
    ],
)
def test_which_inputs_are_cancelled(mode: str, where: Where, rate: int, on: bool) -> None:
    config = PipelineConfig().with_overrides({"sink": {"echo_canceller": mode}})
    assert cancels_echo(config, where, rate) is on


def test_without_its_package_auto_goes_without_and_webrtc_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(rate: int) -> EchoCanceller:
        raise ImportError("the echo canceller needs the livekit package")

    monkeypatch.setattr(echo_intake, "webrtc_canceller", missing)
    auto = PipelineConfig().with_overrides({"sink": {"echo_canceller": "auto"}})
    assert echo_intake.echo_intake_for(auto, "speaker", RATE) is None
    required = auto.with_overrides({"sink": {"echo_canceller": "webrtc"}})
    with pytest.raises(ConfigError, match=r"sink\.echo_canceller: .*livekit"):
        echo_intake.echo_intake_for(required, "speaker", RATE)


def test_the_intake_never_hands_the_listener_an_empty_frame() -> None:
    """(An empty frame is the listener's end of input.) 5 ms frames: every
    other one completes a 10 ms block; positions stay contiguous."""
    intake = EchoIntake(EchoCanceller(RATE, _Recorder()))

    async def frames() -> AsyncIterator[Frame]:
        for i in range(6):
            yield Frame(np.ones(80, dtype=np.int16), RATE, i * 80, _ns((i + 1) * 80))

    async def cleaned() -> list[Frame]:
        return [frame async for frame in intake.frames(frames())]

    out = anyio.run(cleaned)
    assert [len(f.samples) for f in out] == [160, 160, 160]
    assert [f.position for f in out] == [0, 160, 320]

"""The sans-I/O pieces of a served session's input audio: the push-to-talk
button as a detector, the decoder of the client's frames, the audio budget
(its burst, its least charge a frame, and the server's own stalls credited)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.listening.push_to_talk import PushToTalk
from voice_membrane.listening.resample import StreamResampler
from voice_membrane.listening.vad import SpeechEnd, SpeechStart, VadEvent
from voice_membrane.server.doubler import Doubler
from voice_membrane.server.loop_lag import LoopLag
from voice_membrane.server.protocol import MIN_INPUT_FRAME_S, InputAudio
from voice_membrane.server.rate_limit import Verdict
from voice_membrane.server.voice_input import AudioBudget, BadAudio, InputDecoder
from voice_membrane.server.voice_session import MAX_BACKLOG_FRAMES, MAX_BACKLOG_S, VoiceInput
from voice_membrane.vocab.audio import ulaw_from_pcm16


def _where(events: list[VadEvent]) -> list[tuple[str, int]]:
    return [
        ("start" if isinstance(e, SpeechStart) else "end", e.at_sample)
        for e in events
        if isinstance(e, SpeechStart | SpeechEnd)
    ]


def _cuts(total: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, total), max_size=12).map(sorted)


@given(
    presses=st.lists(st.integers(0, 4000), min_size=1, max_size=6).map(sorted),
    cuts=_cuts(5000),
)
@settings(max_examples=200, deadline=None)
def test_the_button_falls_where_pressed_however_the_audio_is_chunked(
    presses: list[int], cuts: list[int]
) -> None:
    """Marks given before the audio reaches them (as a message overtakes frames
    still queued for the listener) come out at their samples, in any chunking."""
    audio = np.zeros(5000, dtype=np.int16)
    button = PushToTalk(16000)
    for i, at in enumerate(presses):
        (button.press if i % 2 == 0 else button.release)(at)
    events: list[VadEvent] = []
    edges = [0, *cuts, len(audio)]
    for a, b in itertools.pairwise(edges):
        events += button.feed(audio[a:b])
    events += button.flush()
    expected = [("start" if i % 2 == 0 else "end", at) for i, at in enumerate(presses)]
    if len(presses) % 2:  # held at the end of input: it ends there
        expected.append(("end", len(audio)))
    assert _where(events) == expected
    assert not button.speaking


def test_a_second_press_or_a_release_without_press_is_refused() -> None:
    button = PushToTalk(16000)
    assert not button.release(0)
    assert button.press(10) and not button.press(20)
    assert button.release(30) and not button.release(40)


def test_a_mark_in_the_past_is_placed_at_the_audio_fed() -> None:
    button = PushToTalk(16000)
    button.feed(np.zeros(100, dtype=np.int16))
    button.press(50)  # (the audio before it was fed already)
    assert _where(button.feed(np.zeros(10, dtype=np.int16))) == [("start", 100)]


@given(cuts=_cuts(4000))
@settings(max_examples=100, deadline=None)
def test_decoded_frames_do_not_depend_on_the_chunking(cuts: list[int]) -> None:
    rng = np.random.default_rng(1)
    audio = (rng.standard_normal(4000) * 3000).astype(np.int16)
    data = ulaw_from_pcm16(audio)
    whole = InputDecoder(InputAudio(encoding="mulaw", sample_rate=8000), 16000)
    reference = whole.decode(data).samples
    parts = InputDecoder(InputAudio(encoding="mulaw", sample_rate=8000), 16000)
    edges = [0, *cuts, len(data)]
    frames = [parts.decode(data[a:b]) for a, b in itertools.pairwise(edges) if b > a]
    assert [f.position for f in frames] == list(
        np.cumsum([0] + [len(f.samples) for f in frames])[:-1]
    )
    np.testing.assert_array_equal(np.concatenate([f.samples for f in frames]), reference)
    assert frames[-1].sample_rate == 16000


def test_pcm16_at_the_listeners_rate_passes_unchanged() -> None:
    audio = np.arange(-160, 160, dtype=np.int16)
    decoder = InputDecoder(InputAudio(), 16000)
    np.testing.assert_array_equal(decoder.decode(audio.tobytes()).samples, audio)


@pytest.mark.parametrize(
    ("declared", "data", "says"),
    [
        (InputAudio(), b"", "empty"),
        (InputAudio(), b"\x00" * 3, "even number"),
        (InputAudio(), b"\x00" * (3200 * 2 + 2), "at most 200 ms"),
        (InputAudio(encoding="mulaw", sample_rate=8000), b"\xff" * 1601, "at most 200 ms"),
    ],
)
def test_frames_that_cannot_be_audio(declared: InputAudio, data: bytes, says: str) -> None:
    with pytest.raises(BadAudio, match=says):
        InputDecoder(declared, 16000).check(data)
    frame_20ms = b"\x00" * (declared.sample_rate // 50 * declared.bytes_per_sample)
    InputDecoder(declared, 16000).check(frame_20ms)  # a frame of the right kind is fine


def test_the_budget_allows_a_second_ahead_then_refuses_then_disconnects() -> None:
    budget = AudioBudget(burst_s=1.0, patience_s=2.0)  # and a frame of 200 ms at most
    assert all(budget.take(0.1, 0.0) is Verdict.ACCEPT for _ in range(12))
    assert budget.take(0.1, 0.0) is Verdict.REFUSE  # told once
    assert budget.take(0.1, 0.0) is Verdict.REFUSE_QUIETLY
    assert budget.take(0.1, 0.15) is Verdict.ACCEPT  # real time gave it room again
    verdicts = [budget.take(0.1, 0.15) for _ in range(22)]  # the same flood: not told again
    assert Verdict.REFUSE not in verdicts and verdicts[-1] is Verdict.DISCONNECT
    budget = AudioBudget(burst_s=1.0, patience_s=2.0)
    assert [budget.take(0.1, 0.0) for _ in range(13)][-1] is Verdict.REFUSE
    assert budget.take(0.1, 1.5) is Verdict.ACCEPT  # back within real time: over
    assert [budget.take(0.1, 1.5) for _ in range(12)][-1] is Verdict.REFUSE  # told again


def test_a_real_time_client_is_never_refused() -> None:
    budget = AudioBudget()
    assert all(budget.take(0.02, i * 0.02 + 0.001) is Verdict.ACCEPT for i in range(5000))


def _streamed(budget: AudioBudget, seconds: float, stall: tuple[float, float]) -> list[Verdict]:
    """A client sending 20 ms frames in real time (frame ``i`` at ``i * 0.02``),
    read by a server whose loop is blocked from ``stall[0]`` to ``stall[1]``:
    the frames sent meanwhile are read at its end, and so is the heartbeat
    (every 50 ms) that fell due in it."""
    start, end = stall
    lag, verdicts, due = LoopLag(), [], 0.05
    lag.expect(due)
    for i in range(round(seconds / 0.02)):
        sent = i * 0.02
        now = end if start <= sent < end else sent
        while (ran := end if start <= due < end else due) <= now:
            lag.beat(ran)
            due = ran + 0.05
            lag.expect(due)
        verdicts.append(budget.take(0.02, now, lag.stalled(now)))
    return verdicts


@pytest.mark.parametrize("stall_s", [1.2, 1.5, 3.5, 6.0, 30.0])
def test_a_server_stall_is_not_charged_to_a_real_time_client(stall_s: float) -> None:
    """The server's loop frozen ``stall_s`` at 2 s, then reading the frames that
    waited all at once: none is refused. Told nothing of the loop's lag (a
    server without a heartbeat), the budget refuses what waited past its burst."""
    start, end = 2.0, 2.0 + stall_s
    verdicts = _streamed(AudioBudget(burst_s=1.0), end + 3, (start, end))
    assert set(verdicts) == {Verdict.ACCEPT}
    blind = AudioBudget(burst_s=1.0)
    read_at = [end if start <= i * 0.02 < end else i * 0.02 for i in range(round(end / 0.02))]
    assert Verdict.REFUSE in [blind.take(0.02, now) for now in read_at]


def test_a_client_faster_than_real_time_is_refused_though_the_server_stalls() -> None:
    """Stalls credit the time they took, never more: a client sending twice real
    time is refused, then dropped, whether or not the server falls behind."""
    for stalls in (False, True):
        budget, lag, verdicts = AudioBudget(burst_s=1.0, patience_s=2.0), LoopLag(), []
        late = 0.0
        for i in range(2000):
            now = i * 0.01 + late  # 20 ms of audio every 10 ms
            lag.expect(now)
            if stalls and i % 100 == 99:
                late += 0.5  # a stall of 0.5 s every second: the frame and the beat run late
                now += 0.5
            lag.beat(now)
            verdicts.append(budget.take(0.02, now, lag.stalled(now)))
            if verdicts[-1] is Verdict.DISCONNECT:
                break
        assert Verdict.REFUSE in verdicts and verdicts[-1] is Verdict.DISCONNECT, stalls


def _burst_after(lag: LoopLag, now: float, quiet_since: float = 0.0) -> float:
    """The audio a client silent since ``quiet_since`` may send at once at ``now``."""
    budget, taken = AudioBudget(burst_s=1.0, now=quiet_since), 0
    while budget.take(0.02, now, lag.stalled(now)) is Verdict.ACCEPT:
        taken += 1
    return round(taken * 0.02, 2)


def test_what_a_stall_credits_lapses_as_the_server_runs_on() -> None:
    """Read right after a stall of 2 s, a client may send its 2 s at once on top
    of the burst (1 s and a frame); its credit lapses as the server runs on, and stalls never add
    up for a client that sends nothing through them."""
    lag = LoopLag()
    lag.expect(0.05)
    lag.beat(2.05)  # the loop blocked 2 s
    assert 3.1 <= _burst_after(lag, 2.05, quiet_since=0.03) <= 3.2
    assert _burst_after(lag, 10.0) == pytest.approx(1.2, abs=0.021)  # later: the burst alone
    for k in range(10):  # ten stalls of 2 s in 100 s
        lag.expect(10.0 * k)
        lag.beat(10.0 * k + 2.0)
    assert _burst_after(lag, 100.0) == pytest.approx(1.2, abs=0.021)


def test_a_frame_is_charged_at_least_the_minimum() -> None:
    """A flood of one-sample frames costs 10 ms each: it is refused once past
    the burst's worth of them, and dropped; one short last frame costs little."""
    budget = AudioBudget(burst_s=1.0, patience_s=2.0, min_frame_s=0.01)
    verdicts = [budget.take(1 / 16000, 0.0) for _ in range(500)]
    assert 119 <= verdicts.count(Verdict.ACCEPT) <= 120  # 1.2 s (the sums' rounding)
    assert Verdict.REFUSE in verdicts and verdicts[-1] is Verdict.DISCONNECT
    budget = AudioBudget(min_frame_s=0.01)
    for i in range(500):  # real time, then the clip's short last piece
        assert budget.take(0.02, i * 0.02) is Verdict.ACCEPT
    assert budget.take(3 / 16000, 10.0) is Verdict.ACCEPT


def test_the_loop_lag_counts_a_stall_while_it_lasts() -> None:
    lag = LoopLag()
    assert lag.stalled(5.0) == 0.0  # no beat due: no lag (a server without a heartbeat)
    lag.expect(1.0)
    assert lag.stalled(0.5) == 0.0 and lag.stalled(1.0) == 0.0
    assert lag.stalled(2.5) == 1.5  # overdue: the loop is stalled (the beat has not run)
    lag.beat(3.0)
    assert lag.stalled(3.0) == 2.0 and lag.stalled(9.0) == 2.0
    lag.expect(3.05)
    lag.beat(3.05)  # on time
    assert lag.stalled(4.0) == 2.0


@given(
    cuts=_cuts(3000),
    extremes=st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_a_calls_doubled_rate_is_the_resamplers_sample_for_sample(
    cuts: list[int], extremes: bool
) -> None:
    # The cheap 8 → 16 kHz path of a call gives exactly the general resampler's
    # samples (its rounding of half-way means too), whatever the chunking.
    rng = np.random.default_rng(len(cuts))
    if extremes:
        audio = rng.choice(np.array([-32768, -32767, -1, 0, 1, 32766, 32767]), 3000)
    else:
        audio = rng.integers(-32768, 32768, 3000)
    audio = audio.astype(np.int16)
    general, doubler = StreamResampler(8000, 16000), Doubler()
    edges = [0, *cuts, len(audio)]
    pieces = [audio[a:b] for a, b in itertools.pairwise(edges)]
    expected = np.concatenate([general.feed(p) for p in pieces])
    got = np.concatenate([doubler.feed(p) for p in pieces])
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, expected)


def test_a_listener_10_s_behind_loses_the_frames_past_it() -> None:
    """Frames wait for the listener up to 10 s of audio (1000 frames: a burst
    and a server stall in 10 ms frames); past that, however short the frames,
    they are dropped and counted rather than held."""
    vad = SimpleNamespace(sample_rate=16000, samples_fed=0)  # a listener that takes nothing
    voice = VoiceInput(
        InputAudio(), cast(Any, None), cast(Any, SimpleNamespace(vad=vad)), cast(Any, None)
    )
    second = b"\x00" * 32000
    for _ in range(round(MAX_BACKLOG_S)):
        voice.feed(second)
    assert voice.inlet.dropped == 0
    voice.feed(b"\x00\x00")
    assert voice.inlet.dropped == 1
    vad.samples_fed = 16000  # it took a second's worth: room for a second more
    voice.feed(second[:-2])
    assert voice.inlet.dropped == 1
    assert MAX_BACKLOG_FRAMES * MIN_INPUT_FRAME_S >= MAX_BACKLOG_S

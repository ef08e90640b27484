"""The level pause (listening/level.py, the endpointer's ``level_pause``): a
rise of the input's level over the playout pauses it before the model hears
speech; the model confirms it within ``level_confirm_s`` or the playout
resumes. On real speech at 8 kHz (a phone call) and scripted."""

from __future__ import annotations

from functools import cache

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st
from listening_audio import RATE, at_level, cough, load, telephone, white_noise
from test_vad_gate import _tv

from voice_membrane.bench.voiced import voiced_bounds
from voice_membrane.listening.decisions import (
    Decision,
    FinalizeStt,
    Interrupt,
    PausePlayout,
    ResumePlayout,
)
from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.level import LevelRiseWatch
from voice_membrane.listening.settings import EndpointSettings, VadSettings
from voice_membrane.listening.silero import SileroVad
from voice_membrane.listening.vad import LevelRise, VadWindow

PHONE = 8000
FRAME = PHONE // 50  # a Twilio media frame: 20 ms
CONFIRM = EndpointSettings().level_confirm_s


def at(seconds: float, rate: int = PHONE) -> int:
    return round(seconds * rate)


def scene(seconds: float, *parts: tuple[float, np.ndarray]) -> np.ndarray:
    """16 kHz pieces placed at their times, then as a phone line carries them."""
    out = np.zeros(round(seconds * RATE), dtype=np.float64)
    for t, piece in parts:
        i = round(t * RATE)
        out[i : i + len(piece)] += piece[: len(out) - i]
    return telephone(np.clip(out, -32768, 32767).astype(np.int16))


def listen(
    audio: np.ndarray,
    sizes: list[int] | None = None,
    endpoint: EndpointSettings | None = None,
    vad: VadSettings | None = None,
) -> list[tuple[int, Decision]]:
    """Silero and the endpointer over ``audio`` (8 kHz) fed in chunks of
    ``sizes`` (cycled; 20 ms frames by default), the assistant speaking
    throughout; each decision with the input sample it was made at."""
    front = SileroVad(vad or VadSettings(), sample_rate=PHONE)
    ep = Endpointer(endpoint or EndpointSettings(), PHONE)
    out = [(0, d) for d in ep.assistant_speaking(True, 0)]
    sizes, i, k = sizes or [FRAME], 0, 0
    while i < len(audio):
        chunk = audio[i : i + sizes[k % len(sizes)]]
        i, k = i + len(chunk), k + 1
        for event in front.feed(chunk):
            out += [(front.samples_fed, d) for d in ep.vad(event)]
        out += [(front.samples_fed, d) for d in ep.advance(front.samples_fed)]
    return out + [(len(audio), d) for d in ep.advance(len(audio) + at(3.0))]


def playout(decisions: list[tuple[int, Decision]]) -> list[tuple[str, int]]:
    return [(type(d).__name__, d.at_sample) for _, d in decisions if not isinstance(d, FinalizeStt)]


# on real speech, as a phone line carries it


@cache
def said(name: str, when: float = 4.0) -> tuple[np.ndarray, int]:
    """``name`` said over the playout ``when`` s in (past the 3 s warm-up), and
    its onset: its first 5 ms block above -50 dBFS (the benchmarks' stopwatch)."""
    audio = scene(when + 2.0, (when, load(name).astype(np.float64)))
    return audio, voiced_bounds(audio, PHONE)[0]


def test_stop_on_a_call_pauses_within_25_ms_of_its_onset_and_the_model_confirms_it() -> None:
    audio, onset = said("stop")
    out = playout(listen(audio))
    assert out[0][0] == "PausePlayout"
    assert onset <= out[0][1] <= onset + at(0.025)
    # confirmed: no resume at the end of the confirmation window (only the
    # false-interruption time ends it here, there being no STT)
    assert [kind for kind, _ in out] == ["PausePlayout", "ResumePlayout"]
    assert out[1][1] >= out[0][1] + at(1.0)


def test_off_it_is_the_models_two_windows_about_0_18_s_after_the_onset() -> None:
    audio, onset = said("stop")
    out = playout(listen(audio, endpoint=EndpointSettings(level_pause="off")))
    assert out[0][0] == "PausePlayout" and out[0][1] > onset + at(0.1)


def test_mm_hm_pauses_at_its_onset_too() -> None:
    audio, onset = said("mmhm")
    out = playout(listen(audio))
    assert out[0] == ("PausePlayout", out[0][1]) and out[0][1] <= onset + at(0.025)
    assert out[1][1] >= out[0][1] + at(1.0)  # the model heard it: no quick resume


def test_a_cough_on_a_call_pauses_then_resumes_after_the_confirmation_window_and_is_no_turn() -> (
    None
):
    audio = scene(6.0, (4.0, cough(-20.0).astype(np.float64)))
    out = playout(listen(audio))
    assert [kind for kind, _ in out] == ["PausePlayout", "ResumePlayout"]
    pause, resume = out[0][1], out[1][1]
    assert at(4.0) <= pause <= at(4.03)
    assert resume == pause + at(CONFIRM)


def test_no_level_pause_in_the_echo_warm_up() -> None:
    audio = scene(4.0, (1.0, cough(-20.0).astype(np.float64)))
    assert playout(listen(audio)) == []


def test_steady_noise_pauses_once_at_its_onset_then_is_the_floor() -> None:
    # a fan switched on at 4 s for 20 s, at -35 dBFS
    audio = scene(24.0, (4.0, white_noise(20.0, -35.0).astype(np.float64)))
    out = playout(listen(audio))
    assert [kind for kind, _ in out] == ["PausePlayout", "ResumePlayout"]


def test_a_minute_of_tv_at_minus_35_dbfs_over_the_playout_makes_no_pause() -> None:
    # the TV on from the start: the detector's adaptive gate has learned it
    # (background.py) by the end of the warm-up; its syllables rise over the
    # floor but not over the gate
    assert playout(listen(telephone(_tv(-35.0)), endpoint=EndpointSettings(echo="aec"))) == []


ECHO = -38.0  # our own voice heard back 20 dB under a user at -18 dBFS


def _echo_scene(user: bool) -> np.ndarray:
    parts = [(0.2 + 2.4 * k, at_level(load("weather"), ECHO).astype(np.float64)) for k in range(4)]
    if user:
        parts.append((7.5, at_level(load("number_start"), -18.0).astype(np.float64)))
    return scene(10.0, *parts)


def test_our_echo_at_minus_20_db_with_aec_off_makes_no_pause_even_with_a_fixed_gate() -> None:
    # the fixed gate lets the echo through to the rise detector: the
    # endpointer's echo level keeps it from pausing
    for vad in (VadSettings(), VadSettings(gate="fixed")):
        assert playout(listen(_echo_scene(False), vad=vad)) == []


def test_the_user_over_the_echo_still_pauses_it() -> None:
    # their first blocks are not 10 dB over the echo's level: the model's
    # windows pause it, as without the level pause
    audio = _echo_scene(True)
    out = playout(listen(audio, vad=VadSettings(gate="fixed")))
    assert out[0][0] == "PausePlayout"
    assert at(7.5) <= out[0][1] <= at(7.5 + 0.15)


def test_auto_is_on_at_8_khz_and_off_at_16_khz() -> None:
    rise = LevelRise(at(4.0, RATE), at(4.012, RATE), -20.0)
    for rate, pauses in ((PHONE, True), (RATE, False)):
        ep = Endpointer(EndpointSettings(echo="aec"), rate)
        ep.assistant_speaking(True, 0)
        r = LevelRise(rise.at_sample * rate // RATE, rise.confirmed_at * rate // RATE, -20.0)
        assert bool(ep.vad(r)) is pauses


# decisions dated in samples, whatever the chunking


@cache
def _phone_call() -> np.ndarray:
    return scene(
        9.0,
        (3.5, cough(-20.0).astype(np.float64)),
        (4.5, load("mmhm").astype(np.float64)),
        (6.5, load("stop").astype(np.float64)),
    )


@cache
def _reference() -> list[Decision]:
    return [d for _, d in listen(_phone_call())]


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(1, 1200), min_size=1, max_size=20))
@example([37, 1, 160])
def test_any_chunking_gives_the_same_decisions_at_the_same_samples(sizes: list[int]) -> None:
    out = [d for _, d in listen(_phone_call(), sizes)]
    assert out == _reference()
    assert sum(isinstance(d, PausePlayout) for d in out) == 3  # cough, mm-hm, stop


# the rise detector alone


def _blocks(watch: LevelRiseWatch, levels: list[float], gate: float = -50.0) -> list[LevelRise]:
    found = []
    for i, level in enumerate(levels):
        rise = watch.block(i * 32, 32, level, gate)
        if rise is not None:
            found.append(rise)
    return found


def test_a_rise_is_dated_where_it_began_and_reported_once_per_loud_stretch() -> None:
    watch = LevelRiseWatch(12.0, 0.012, 32, PHONE)  # 3 blocks of 4 ms
    found = _blocks(watch, [-70.0] * 10 + [-40.0] * 50 + [-70.0] * 30 + [-40.0] * 5)
    assert found == [LevelRise(320, 320 + 3 * 32, -40.0), LevelRise(90 * 32, 93 * 32, -40.0)]


def test_a_click_or_a_quiet_gap_under_the_rearm_time_is_no_new_rise() -> None:
    watch = LevelRiseWatch(12.0, 0.012, 32, PHONE)
    assert _blocks(watch, [-70.0] * 10 + [-30.0, -30.0] + [-70.0] * 10) == []  # 8 ms: a click
    found = _blocks(watch, [-70.0] * 10 + [-40.0] * 20 + [-70.0] * 5 + [-40.0] * 20)
    assert len(found) == 1  # 20 ms between syllables does not re-arm it


def test_nothing_under_the_gate_rises() -> None:
    watch = LevelRiseWatch(12.0, 0.012, 32, PHONE)
    assert _blocks(watch, [-90.0] * 10 + [-55.0] * 20, gate=-50.0) == []
    assert _blocks(watch, [-90.0] * 10 + [-35.0] * 20, gate=-29.0) == []  # a TV's background


# scripted, on the endpointer alone


def _ep(**kw: object) -> Endpointer:
    ep = Endpointer(EndpointSettings(level_pause="on", echo="aec", **kw), RATE)  # type: ignore[arg-type]
    ep.assistant_speaking(True, 0)
    return ep


def test_windows_that_confirm_in_time_keep_the_pause_and_late_ones_do_not() -> None:
    ep = _ep()
    rise = LevelRise(at(4.0, RATE), at(4.012, RATE), -20.0)
    assert ep.vad(rise) == [PausePlayout(at(4.012, RATE))]
    windows = range(at(4.1, RATE), at(4.2, RATE), 512)
    for w0 in windows:
        assert ep.vad(VadWindow(w0, 512, 0.9, -20.0, False)) == []
    # confirmed: the usual rules take over (speech the detector never
    # confirmed as a start: resume a quarter second after it)
    run_end = windows[-1] + 512
    assert ep.advance(at(5.0, RATE)) == [ResumePlayout(run_end + at(0.25, RATE))]
    ep = _ep()
    ep.vad(rise)
    out = ep.advance(at(4.5, RATE))
    assert out == [ResumePlayout(at(4.012 + CONFIRM, RATE))]
    # speech the model hears after the window pauses again, dated after the resume
    decisions: list[Decision] = []
    for w0 in range(at(4.5, RATE), at(4.7, RATE), 512):
        decisions += ep.vad(VadWindow(w0, 512, 0.9, -20.0, False))
    pauses = [d for d in decisions if isinstance(d, PausePlayout)]
    assert len(pauses) == 1 and pauses[0].at_sample >= at(4.5, RATE)


def test_real_words_during_the_confirmation_window_confirm_it() -> None:
    from voice_membrane.listening.vad import SpeechStart
    from voice_membrane.vocab.transcripts import Transcript

    ep = _ep()
    ep.vad(LevelRise(at(4.0, RATE), at(4.012, RATE), -20.0))
    empty = np.zeros(0, dtype=np.int16)
    ep.vad(SpeechStart(at(4.0, RATE), at(4.2, RATE), at(3.5, RATE), empty))
    assert ep.transcript(Transcript("stop", False), at(4.25, RATE)) == []  # a partial
    assert ep.advance(at(4.6, RATE)) == []  # no resume at the window's end
    out = ep.transcript(Transcript("stop", True), at(4.7, RATE))
    assert [type(d) for d in out] == [Interrupt]


def test_half_duplex_and_off_never_pause_on_a_level() -> None:
    rise = LevelRise(at(4.0, RATE), at(4.012, RATE), -20.0)
    for kw in ({"echo": "half_duplex"}, {"level_pause": "off"}):
        ep = Endpointer(EndpointSettings(**{"level_pause": "on", **kw}), RATE)  # type: ignore[arg-type]
        ep.assistant_speaking(True, 0)
        assert ep.vad(rise) == []


def test_on_a_call_heard_at_16_khz_stop_still_pauses_at_its_onset() -> None:
    # serve's phone route with an STT that takes 16 kHz: the detector hears
    # the 8 kHz call upsampled
    from voice_membrane.listening.resample import StreamResampler

    audio, onset = said("stop")
    wide = StreamResampler(PHONE, RATE).feed(audio)
    front = SileroVad(VadSettings(), sample_rate=RATE)
    ep = Endpointer(EndpointSettings(level_pause="on"), RATE)
    out = ep.assistant_speaking(True, 0)
    for i in range(0, len(wide), RATE // 50):
        for event in front.feed(wide[i : i + RATE // 50]):
            out += ep.vad(event)
    pauses = [d.at_sample for d in out if isinstance(d, PausePlayout)]
    assert pauses and 2 * onset <= pauses[0] <= 2 * onset + at(0.025, RATE)


def test_auto_is_on_for_a_listener_whose_audio_arrives_at_8_khz() -> None:
    from voice_membrane.pipeline.config import PipelineConfig
    from voice_membrane.pipeline.listen_build import listener_for

    class Stt:  # all listener_for reads of the engine
        sample_rate = RATE

    config = PipelineConfig()
    for input_rate, mode in ((PHONE, "on"), (RATE, "auto"), (None, "auto")):
        listener = listener_for(config, Stt(), input_rate=input_rate)  # type: ignore[arg-type]
        assert listener.endpointer.settings.level_pause == mode
        # the detector watches for rises only when the endpointer uses them
        assert listener.vad.watch_rises is (mode == "on")  # type: ignore[attr-defined]


def test_a_detector_not_watching_for_rises_says_the_rest_alike() -> None:
    """Off (the level pause off: the rises cost about a fifth of the detector),
    the windows, starts and ends are those of a detector that watches."""
    audio = scene(4.0, (0.5, load("stop").astype(np.float64)), (2.5, cough(-26)))
    events = {}
    for watch in (True, False):
        vad = SileroVad(sample_rate=PHONE)
        vad.watch_rises = watch
        events[watch] = [
            e for i in range(0, len(audio), FRAME) for e in vad.feed(audio[i : i + FRAME])
        ]
    rises = [e for e in events[True] if isinstance(e, LevelRise)]
    assert rises and not any(isinstance(e, LevelRise) for e in events[False])
    assert [e for e in events[True] if not isinstance(e, LevelRise)] == events[False]

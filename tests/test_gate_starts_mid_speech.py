"""A recording that starts mid-speech, and a talker whose voice drops as they
go on, are heard to the end (issue 43: through the shipped path the real long
stretches lost most of their words to the adaptive gate).

- Speech already going as listening begins is a TV left on for a live
  microphone or call, but in a recording (``run --input``, the benchmarks'
  files) it is the user's first words: ``listener_for(..., recording=True)``.
  Before, a soft reading that starts at once was learned as the background
  after its first phrase and nothing started again.
- A stretch the user began stays theirs while it goes on, however far their
  voice drops under their first words: before, speech 12 dB under the user's
  own was taken for a TV switched on after they spoke (``real/long/
  monologue_cold``: a speaker who starts at -15 dBFS and goes on at -30 to
  -40 was cut at 9.3 s of 25.7).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile
from listener_stt import SaysWeather
from test_gate_long_talker import (
    END_S,
    NAMES,
    RATE,
    at_loudest_tenth,
    monologue,
    room,
    speech_span,
)
from test_vad import run, segments
from test_vad_gate import _tv

from voice_membrane.listening.engines import make_vad
from voice_membrane.listening.front import VadFront
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.listen_build import listener_for
from voice_membrane.vocab.audio import Samples

ROOT = Path(__file__).resolve().parent.parent
REAL_LONG = ROOT / "audio_fixtures" / "real" / "long"
LOCAL_VOICE = ROOT / "pipelines" / "local-voice.toml"
MISSED_S = 0.1  # (measured 0.0 in every case; the old gate missed 1.2-15 s)


def shipped_detector(recording: bool) -> VadFront:
    # the listener is built, not run: its detector is what is looked at
    listener = listener_for(load_pipeline(LOCAL_VOICE), SaysWeather(), recording=recording)
    return listener.vad


def heard(detector: VadFront, audio: Samples) -> list[tuple[int, int]]:
    return segments(run(detector, np.concatenate([audio, room(2.0)])))


def missed_s(found: list[tuple[int, int]], audio: Samples) -> float:
    """How much of what the fixed floor alone hears in ``audio`` is in no
    segment of ``found``, seconds (the floor's own gaps, where it shuts soft
    syllables, are not the adaptive gate's doing)."""
    fixed = load_pipeline(LOCAL_VOICE).vad.model_copy(update={"gate": "fixed"})
    reference = heard(make_vad(fixed, RATE), audio)
    covered = np.zeros(len(audio) + 2 * RATE, dtype=bool)
    for start, end in found:
        covered[start:end] = True
    assert reference
    return sum(int(np.count_nonzero(~covered[s:e])) for s, e in reference) / RATE


@pytest.mark.parametrize("level", [-28.0, -35.0])
@pytest.mark.parametrize("name", NAMES)
def test_a_recording_that_starts_mid_speech_is_heard_to_the_end(name: str, level: float) -> None:
    voice = at_loudest_tenth(monologue(name), level)
    _, end = speech_span(voice)
    found = heard(shipped_detector(recording=True), voice)
    assert missed_s(found, voice) <= MISSED_S, found
    assert found[-1][1] >= end - round(END_S * RATE), (found[-1], end)


def test_live_the_same_speech_going_at_the_start_is_a_tv_left_on() -> None:
    # what recording=True changes: live, speech already going when the
    # microphone opens is someone else's, as a TV's is
    voice = at_loudest_tenth(monologue(NAMES[0]), -35.0)
    start, end = speech_span(voice)
    live = heard(shipped_detector(recording=False), voice)
    assert sum(e - s for s, e in live) < 0.5 * (end - start), live
    assert heard(shipped_detector(recording=False), _tv(-35.0, 30)) == []


@pytest.mark.parametrize("recording", [False, True])
def test_a_talker_whose_voice_drops_as_they_go_on_is_heard_to_the_end(recording: bool) -> None:
    data, rate = soundfile.read(REAL_LONG / "monologue_cold.flac", dtype="int16")
    assert rate == RATE
    voice = np.asarray(data, dtype=np.int16)
    _, end = speech_span(voice)
    found = heard(shipped_detector(recording), voice)
    assert missed_s(found, voice) <= MISSED_S, found
    assert found[-1][1] >= end - round(END_S * RATE), (found[-1], end)


def test_a_configured_already_talking_wins_over_the_source() -> None:
    config = load_pipeline(LOCAL_VOICE)
    pinned = config.model_copy(
        update={"vad": config.vad.model_copy(update={"already_talking": "background"})}
    )
    voice = at_loudest_tenth(monologue(NAMES[0]), -35.0)
    start, end = speech_span(voice)
    found = heard(listener_for(pinned, SaysWeather(), recording=True).vad, voice)
    assert sum(e - s for s, e in found) < 0.5 * (end - start), found
    assert heard(make_vad(config.vad, RATE), voice) == found  # auto alone: live

"""The end-of-turn model (smart-turn v3.2 from the pipecat-ai wheel) and its
features: a finished question is judged done, the same question stopped
mid-sentence is not, and what the model hears is the last 8 s."""

from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import soundfile

from voice_membrane.listening.turn_features import WINDOW, log_mel
from voice_membrane.listening.turn_model import (
    SmartTurn,
    TurnModelError,
    load_turn_model,
    smart_turn_path,
)

pytest.importorskip("onnxruntime")

RATE = 16_000
QUESTIONS = Path(__file__).parent.parent / "audio_fixtures" / "speech" / "questions"
THRESHOLD = 0.5  # [endpoint] turn_threshold's default


def _weather() -> np.ndarray:
    """The question "what is the weather in paris today" (Piper): speech 0.30-2.07 s."""
    data, rate = soundfile.read(QUESTIONS / "weather_paris.wav", dtype="float32")
    assert rate == RATE
    return np.asarray(data, dtype=np.float32)


def _complete() -> np.ndarray:
    """The whole question and 0.2 s of silence: what the listener asks about
    at the detector's confirmed stop."""
    return _weather()[: round(2.27 * RATE)]


def _cut() -> np.ndarray:
    """Its first words, "what is the weather in", and 0.2 s of silence: 1.30 s is between "in" and
    "paris" (whisper tiny.en hears exactly those five words from 1.24 s to 1.36 s)."""
    return np.concatenate(
        [_weather()[: round(1.30 * RATE)], np.zeros(round(0.2 * RATE), np.float32)]
    )


@pytest.fixture(scope="module")
def model() -> SmartTurn:
    loaded = load_turn_model("smart-turn")
    assert isinstance(loaded, SmartTurn)
    return loaded


def test_loads_once_per_process_without_importing_pipecat(model: SmartTurn) -> None:
    assert model.name == "smart-turn"
    again = load_turn_model("smart-turn")
    assert isinstance(again, SmartTurn) and again._session is model._session
    assert "pipecat" not in sys.modules  # found by find_spec, never imported


def _pipecats_features(audio: np.ndarray) -> np.ndarray:
    """Pipecat's own input for ``audio``: its copy of transformers'
    WhisperFeatureExtractor, from the installed wheel (loaded as a file: pipecat
    itself is never imported), after its zeros before the audio."""
    path = smart_turn_path().parent.parent / "_whisper_features.py"
    spec = importlib.util.spec_from_file_location("pipecats_whisper_features", path)
    assert spec is not None and spec.loader is not None, path
    features = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(features)
    padded = np.pad(audio, (WINDOW - len(audio), 0))
    return np.asarray(features.compute_whisper_log_mel_features(padded, do_normalize=True))


def test_complete_question_is_done_and_cut_one_is_not(model: SmartTurn) -> None:
    done = model.done_probability(_complete())
    unfinished = model.done_probability(_cut())
    assert done > THRESHOLD > unfinished, (done, unfinished)


def test_the_model_hears_exactly_pipecats_features() -> None:
    # What the model answers depends on the CPU's int8 kernels (0.860 and 0.037
    # for these two on the machine of 2026-11-29, 0.984 and 0.013 on one with
    # AVX-512 VNNI); its input does not: ours is Pipecat's, to the bit.
    for audio in (_complete(), _cut()):
        np.testing.assert_array_equal(log_mel(audio), _pipecats_features(audio))


def test_the_model_hears_the_last_8_s_zeros_before_a_shorter_input(model: SmartTurn) -> None:
    short = _complete()
    padded = np.concatenate([np.zeros(WINDOW - len(short), np.float32), short])
    np.testing.assert_array_equal(log_mel(short), log_mel(padded))
    rng = np.random.default_rng(3)
    long = np.concatenate([(rng.standard_normal(10 * RATE) * 0.05).astype(np.float32), short])
    assert len(long) > WINDOW
    np.testing.assert_array_equal(log_mel(long), log_mel(long[-WINDOW:]))
    assert 0.0 <= model.done_probability(long) <= 1.0
    assert log_mel(short).shape == (80, 800)


def test_silence_and_empty_audio_do_not_crash(model: SmartTurn) -> None:
    for samples in (
        np.zeros(RATE, np.float32),
        np.zeros(0, np.float32),
        np.zeros(12 * RATE, np.float32),
    ):
        probability = model.done_probability(samples)
        assert 0.0 <= probability <= 1.0


def test_many_threads_at_once_get_what_each_would_alone(model: SmartTurn) -> None:
    clips = [_complete(), _cut()] * 3
    alone = [model.done_probability(clip) for clip in clips]
    with ThreadPoolExecutor(max_workers=len(clips)) as pool:
        together = list(pool.map(model.done_probability, clips))
    assert together == alone


def test_a_missing_model_is_one_line_naming_the_package(tmp_path: Path) -> None:
    with pytest.raises(TurnModelError) as caught:
        load_turn_model("smart-turn", model_file=tmp_path / "smart-turn-v3.2-cpu.onnx")
    message = str(caught.value)
    assert "\n" not in message and "pipecat-ai" in message and "--no-deps" in message


def test_a_broken_model_file_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    with pytest.raises(TurnModelError) as caught:
        load_turn_model("smart-turn", model_file=broken)
    assert "\n" not in str(caught.value) and str(broken) in str(caught.value)


def test_an_unknown_model_name_is_refused() -> None:
    with pytest.raises(TurnModelError, match="unknown end-of-turn model 'vibes'"):
        load_turn_model("vibes")

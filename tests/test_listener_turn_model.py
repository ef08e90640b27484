"""The listener asks the end-of-turn model (``[endpoint] turn_model``) at each
speech end and gives the endpointer its answer before any other input: what
audio the model hears, what its answer does, and a model that fails."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import numpy as np
import numpy.typing as npt
import pytest
import soundfile as sf
from listener_stt import RATE, SAID, SaysWeather, asked_twice

from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.engines import make_vad
from voice_membrane.listening.settings import EndpointSettings, VadSettings
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.listen_build import listener_for
from voice_membrane.pipeline.listening import Listener, ListenError, ListenItem, UserTurn
from voice_membrane.pipeline.turn_judge import MODEL_RATE, TurnJudge
from voice_membrane.sources.base import Frame

MODEL = EndpointSettings(turn_model="smart-turn", preemptive=False)
ROOT = Path(__file__).resolve().parent.parent
FRAME = 320


class Answers:
    """An end-of-turn model that says ``probability`` and keeps what it heard
    (or fails, when ``fails``)."""

    name = "answers"

    def __init__(self, probability: float, fails: bool = False) -> None:
        self.probability, self.fails = probability, fails
        self.heard: list[npt.NDArray[np.float32]] = []

    def done_probability(self, samples: npt.NDArray[np.float32]) -> float:
        self.heard.append(samples)
        if self.fails:
            raise RuntimeError("onnxruntime: bad input")
        return self.probability


def listen(model: Answers | None, settings: EndpointSettings = MODEL) -> list[ListenItem]:
    """weather.wav asked twice, fed as fast as it goes."""
    listener = Listener(
        make_vad(VadSettings(), RATE),
        SaysWeather(),
        Endpointer(settings, RATE),
        turn_judge=None if model is None else TurnJudge(model, RATE),
    )
    return heard_all(listener, asked_twice())


def heard_all(listener: Listener, audio: np.ndarray) -> list[ListenItem]:
    """What ``listener`` says of ``audio``, fed in 20 ms frames as fast as it goes."""

    async def frames() -> AsyncIterator[Frame]:
        for i in range(0, len(audio), FRAME):
            yield Frame(audio[i : i + FRAME], RATE, i, 0)

    async def go() -> list[ListenItem]:
        send, receive = anyio.create_memory_object_stream[ListenItem](1000)
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.run, frames(), send)
                items = [item async for item in receive]
        return items

    return anyio.run(go)


def turns(items: list[ListenItem]) -> list[UserTurn]:
    return [item for item in items if isinstance(item, UserTurn)]


def test_judged_done_each_turn_is_the_models_and_carries_its_time() -> None:
    model = Answers(0.97)
    found = turns(listen(model))
    assert [(t.text, t.reason) for t in found] == [(SAID, "model")] * 2
    assert all(t.turn_model_ms is not None and t.turn_model_ms >= 0 for t in found)
    assert len(model.heard) == 2


def test_the_model_hears_the_utterance_up_to_the_confirmed_stop_at_16_khz() -> None:
    model = Answers(0.97)
    listen(model)
    first = model.heard[0]
    assert first.dtype == np.float32 and np.abs(first).max() <= 1.0
    # weather.wav is ~2.3 s: the speech from its start, and the detector's
    # confirmation silence after it, nothing of the half second before
    seconds = len(first) / MODEL_RATE
    assert 1.8 < seconds < 3.2
    assert np.abs(first[: MODEL_RATE // 20]).max() > 0  # begins in the speech
    tail = first[-MODEL_RATE // 10 :]
    assert np.abs(tail).max() < np.abs(first).max() / 10  # ends in the pause


def test_judged_not_done_the_user_is_waited_for_longer() -> None:
    # 1 s between the two questions: within turn_wait_s (2 s), so one turn
    (turn,) = turns(listen(Answers(0.02)))
    assert (turn.text, turn.reason) == (f"{SAID} {SAID}", "silence")
    assert turn.turn_model_ms is not None


def test_a_failing_model_is_said_once_and_the_silence_rule_decides() -> None:
    items = listen(Answers(0.97, fails=True))
    errors = [item.message for item in items if isinstance(item, ListenError)]
    assert len(errors) == 1
    assert "end-of-turn model failed (RuntimeError: onnxruntime: bad input)" in errors[0]
    assert [(t.text, t.reason) for t in turns(items)] == [(SAID, "silence")] * 2


def test_with_no_model_given_the_endpointer_is_answered_none() -> None:
    found = turns(listen(None))
    assert [(t.text, t.reason, t.turn_model_ms) for t in found] == [(SAID, "silence", None)] * 2


def test_the_model_hears_at_most_8_s_and_phone_audio_upsampled() -> None:
    judge = TurnJudge(Answers(0.5), 8000)
    tone = (np.sin(np.arange(8000 * 12) / 3) * 8000).astype(np.int16)
    for i in range(0, len(tone), 160):
        judge.note(Frame(tone[i : i + 160], 8000, i, 0))
    heard = judge.audio(0, len(tone))
    assert len(heard) == 8 * MODEL_RATE  # the last 8 s, at 16 kHz
    assert len(judge.audio(8000 * 11, len(tone))) == MODEL_RATE  # from the utterance's start


def test_a_rate_the_model_cannot_take_is_refused() -> None:
    with pytest.raises(ValueError, match="16 kHz"):
        TurnJudge(Answers(0.5), 44_100)


# The real model, through ``listener_for`` as ``run`` and ``serve`` build it


def _weather_paris() -> np.ndarray:
    """questions/weather_paris.wav (Piper): "what is the weather in" ends by
    1.30 s, "paris today" follows; the speech ends at 2.07 s."""
    path = Path(__file__).parent.parent / "audio_fixtures" / "speech" / "questions"
    audio, rate = sf.read(path / "weather_paris.wav", dtype="int16")
    assert rate == RATE
    return np.asarray(audio, dtype=np.int16)


def listen_with(turn_model: str, audio: np.ndarray) -> list[UserTurn]:
    config = load_pipeline(ROOT / "pipelines" / "local-voice.toml").with_overrides(
        # (the shape off: the cut ends on "in", which alone would keep the turn)
        {"endpoint": {"turn_model": turn_model, "transcript_shape": False, "preemptive": False}}
    )
    return turns(heard_all(listener_for(config, SaysWeather(), recording=True), audio))


def test_the_real_model_ends_a_finished_question_and_waits_through_a_cut_one() -> None:
    pytest.importorskip("onnxruntime")
    question = _weather_paris()
    silence = np.zeros(RATE, np.int16)
    (done,) = listen_with("smart-turn", np.concatenate([silence, question, silence]))
    assert (done.reason, done.turn_model_ms is not None) == ("model", True)
    # "what is the weather in" … 1 s … "paris today": judged not done at the pause
    cut = round(1.30 * RATE)
    paused = np.concatenate([silence, question[:cut], silence, question[cut:], silence, silence])
    # (this recogniser says the whole question on each stretch's stream, so the
    # second stream's final, taken after the turn, is a late turn of its own)
    assert len(decided(listen_with("smart-turn", paused))) == 1
    assert len(decided(listen_with("none", paused))) == 2  # the 0.6 s rule cuts the user off


def decided(heard: list[UserTurn]) -> list[UserTurn]:
    """The turns the endpointer decided (not late finals')."""
    return [t for t in heard if t.reason != "late"]


def test_a_missing_model_is_one_config_error_naming_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from voice_membrane.listening import turn_model
    from voice_membrane.pipeline.config import ConfigError

    monkeypatch.setattr(turn_model, "_PACKAGE", "no_such_package_here")
    config = load_pipeline(ROOT / "pipelines" / "local-voice.toml").with_overrides(
        {"endpoint": {"turn_model": "smart-turn"}}
    )
    with pytest.raises(ConfigError) as raised:
        listener_for(config, SaysWeather())
    message = str(raised.value)
    assert "\n" not in message and "pipecat-ai" in message

"""A turn the end-of-turn model ended says so in its report: ``converse`` over
a listener whose model judges the user done (a stand-in for smart-turn, as
tests/test_listener_turn_model.py's) reports ``endpoint_reason`` ``model`` and
the model's own time, in the record ``run --metrics-json`` and ``serve`` give."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import numpy.typing as npt
import soundfile as sf
from listener_stt import RATE, SAID, SaysWeather
from serve_helpers import SHORT_REPLY, write_pipeline

from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.engines import make_vad
from voice_membrane.listening.settings import EndpointSettings, VadSettings
from voice_membrane.pipeline.build import build_parts, session_for
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.listening import Listener
from voice_membrane.pipeline.turn_judge import TurnJudge
from voice_membrane.pipeline.voice_loop import VoiceTurn, converse, turn_record
from voice_membrane.sources.base import Frame

WEATHER = Path(__file__).resolve().parent.parent / "audio_fixtures" / "listening" / "weather.wav"


class SaysDone:
    """An end-of-turn model sure the speaker is done."""

    def done_probability(self, samples: npt.NDArray[np.float32]) -> float:
        return 0.97


def test_a_turn_the_model_ended_reports_model_and_its_time(tmp_path: Path) -> None:
    question, rate = sf.read(WEATHER, dtype="int16")
    assert rate == RATE
    silence = np.zeros(RATE, np.int16)
    audio = np.concatenate([silence[: RATE // 2], question, silence])
    config = load_pipeline(write_pipeline(tmp_path, "judged", SHORT_REPLY))
    settings = EndpointSettings(turn_model="smart-turn", preemptive=False, echo="aec")
    listener = Listener(
        make_vad(VadSettings(), RATE),
        SaysWeather(),
        Endpointer(settings, RATE),
        turn_judge=TurnJudge(SaysDone(), RATE),
    )

    async def frames() -> AsyncIterator[Frame]:
        for i in range(0, len(audio), 320):
            yield Frame(audio[i : i + 320], RATE, i, 0)

    async def go() -> list[VoiceTurn]:
        session = session_for(config, build_parts(config), log=lambda record: None)
        with anyio.fail_after(30):  # a guard against a hang, not a timing check
            async with session:
                return await converse(session, listener, frames())

    (turn,) = anyio.run(go)
    assert turn.heard.text == SAID
    end = turn.result.report.end
    assert end is not None and (end.reason, end.barge_in) == ("model", False)
    assert end.turn_model_ms is not None and end.turn_model_ms >= 0
    record: dict[str, Any] = turn_record(turn)
    assert (record["endpoint_reason"], record["heard"]["reason"]) == ("model", "model")
    assert record["turn_model_ms"] == round(end.turn_model_ms, 3)

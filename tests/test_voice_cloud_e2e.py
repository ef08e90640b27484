"""The shipped cloud voice loop (pipelines/openai-voice.toml) end to end, offline:
a spoken question in (a Piper fixture, played as if into a microphone), OpenAI's
Realtime transcription, chat and speech all answered by the fakes of
``voice_membrane.testing`` through the official SDK — heard, answered, spoken,
with its voice-to-voice latency."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import soundfile as sf

from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.fake_openai_speech import FakeOpenAISpeech
from voice_membrane.testing.fake_openai_transcribe import FakeOpenAITranscribe
from voice_membrane.testing.script import ScriptedReply, text
from voice_membrane.testing.transcript_script import TranscriptScript

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "What is the weather in Paris today?"
ANSWER = "Light rain in Paris today, so take an umbrella."
KEY = "sk-test-" + "v" * 32


def test_the_cloud_voice_pipeline_hears_answers_and_speaks(tmp_path: Path) -> None:
    shipped = (ROOT / "pipelines" / "openai-voice.toml").read_text(encoding="utf-8")
    with (
        FakeOpenAITranscribe(
            TranscriptScript.of(QUESTION, word_s=0.2, gap_s=0.05), api_key=KEY
        ) as ears,
        FakeOpenAI(ScriptedReply.of(text(ANSWER), delta_chars=6)) as brain,
        FakeOpenAISpeech(api_key=KEY) as voice,
    ):
        pipeline = tmp_path / "voice.toml"
        pipeline.write_text(
            shipped.replace("[llm]\n", f'[llm]\nbase_url = "{brain.base_url}"\n')
            .replace("[tts]\n", f'[tts]\nbase_url = "{voice.base_url}"\n')
            .replace("[stt]\n", f'[stt]\nbase_url = "{ears.base_url}"\n'),
            encoding="utf-8",
        )
        wav, metrics = tmp_path / "reply.wav", tmp_path / "m.json"
        env = {**os.environ, "OPENAI_API_KEY": KEY}
        env.pop("OPENAI_BASE_URL", None)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "voice_membrane.cli",
                "run",
                "--pipeline",
                str(pipeline),
                "--input",
                str(ROOT / "audio_fixtures/speech/questions/weather_paris.wav"),
                "--out",
                str(wav),
                "--metrics-json",
                str(metrics),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        asked = [r.body for r in brain.requests if isinstance(r.body, dict)]
    assert done.returncode == 0, done.stderr + done.stdout
    assert f"> {QUESTION}\n" in done.stdout, done.stdout
    # The chat model was asked what was heard, and the answer was spoken.
    assert QUESTION in json.dumps(asked[0]["messages"])
    assert ANSWER in done.stdout
    samples, rate = sf.read(wav, dtype="int16")
    assert rate == 24000 and len(samples) / rate > 1.0
    (record,) = json.loads(metrics.read_text())
    assert record["heard"]["text"] == QUESTION
    assert record["voice_to_voice"]["voice_to_voice_ms"] > record["voice_to_voice"]["request_ms"]
    assert KEY not in done.stdout + done.stderr

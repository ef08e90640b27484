"""`voice-membrane run --llm anthropic:MODEL --tts CLOUD:VOICE` end to end: the
command line (a subprocess) talks to the LLM's and the TTS service's fake
servers, found through the SDKs' environment variables, and speaks the visible
text — no thinking, no markdown — through the cloud voice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import soundfile as sf

from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.fake_elevenlabs import FakeElevenLabs
from voice_membrane.testing.fake_openai_speech import FakeOpenAISpeech
from voice_membrane.testing.fake_speech import SpeechServer
from voice_membrane.testing.script import ScriptedReply, text, thinking
from voice_membrane.testing.speech_check import analyze_speech, speech_problems

CLI = [sys.executable, "-m", "voice_membrane.cli"]
PLAN = "Keep it to two sentences."
ANSWER = "**Sure.** The sky looks blue because air scatters blue light the most. Sunsets are red."
SPOKEN = "Sure. The sky looks blue because air scatters blue light the most. Sunsets are red."
BASE_VARS = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "ELEVENLABS_BASE_URL")

# (--tts spec, the fake speaking its protocol, the rate of the WAV it makes)
ENGINES: list[tuple[str, Callable[[], SpeechServer], int]] = [
    ("elevenlabs:fake-voice", FakeElevenLabs, 22050),
    ("elevenlabs-http:fake-voice", FakeElevenLabs, 22050),
    ("openai:alloy", FakeOpenAISpeech, 24000),
]


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **env}
    for name in BASE_VARS:
        if name not in env:
            full_env.pop(name, None)
    return subprocess.run(
        [*CLI, "run", *args], env=full_env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(("spec", "fake", "rate"), ENGINES, ids=[e[0] for e in ENGINES])
def test_a_cloud_voice_speaks_only_the_visible_text(
    tmp_path: Path, spec: str, fake: Callable[[], SpeechServer], rate: int
) -> None:
    wav, metrics = tmp_path / "a.wav", tmp_path / "m.json"
    reply = ScriptedReply.of(thinking(PLAN), text(ANSWER), delta_chars=5)
    with FakeAnthropic(reply) as llm, fake() as voice:
        done = run_cli(
            [
                "--llm",
                "anthropic:claude-test",
                "--tts",
                spec,
                "--out",
                str(wav),
                "--metrics-json",
                str(metrics),
                "--prompt",
                "Why is the sky blue?",
            ],
            {**llm.env(), **voice.env()},
        )
        sent = pieces_sent(voice)
    assert done.returncode == 0, done.stderr + done.stdout
    # The service heard the visible text, markdown removed, each word once (HTTP
    # requests overlap: they may arrive out of order, their audio is played in order).
    assert sorted(" ".join(sent).split()) == sorted(SPOKEN.split())
    assert len(sent) > 1
    samples, wav_rate = sf.read(wav, dtype="int16")
    assert wav_rate == rate
    assert speech_problems(analyze_speech(samples, wav_rate), SPOKEN) == []
    report = json.loads(metrics.read_text())
    assert report["tts"] == spec
    stream = report["tts_stream"]
    assert sorted(p["chars"] for p in stream["pieces"]) == sorted(len(p.strip()) for p in sent)
    assert all(p["first_byte_ms"] is not None for p in stream["pieces"])
    assert stream["chars_billed"] >= len(SPOKEN) - len(sent) and stream["reconnects"] == 0
    assert abs(sum(p["audio_seconds"] for p in stream["pieces"]) - len(samples) / wav_rate) < 0.01
    assert "first audio" in done.stdout


def pieces_sent(voice: SpeechServer) -> list[str]:
    """The text of each piece the service received: a request's input, or a socket
    message's text (not the blank that opens a socket or keeps it alive)."""
    sent = [
        r.body.get("input", r.body.get("text", ""))
        for r in voice.requests
        if isinstance(r.body, dict) and r.method == "POST"
    ]
    for connection in voice.connections:
        for message in connection.messages:
            if isinstance(message, dict) and str(message.get("text", "")).strip():
                sent.append(message["text"])
    return sent

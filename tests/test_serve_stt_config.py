"""A broken ``[stt]`` stops ``serve`` at start-up, in one line naming the
pipeline and what is wrong, as a missing LLM key does — not a server that says
it is ready and closes every listening session with 1011. And the base URL
schemes are what docs/stt.md says: Deepgram takes ``ws://`` (the same host as
``http://``), OpenAI's transcription only ``http(s)://``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from serve_helpers import SHORT_REPLY, start, write_pipeline
from serve_voice_helpers import clip, silence, speak
from websockets.asyncio.client import connect

from voice_membrane.pipeline.config import ConfigError
from voice_membrane.server.server import Server
from voice_membrane.testing.fake_deepgram import FakeDeepgram
from voice_membrane.testing.transcript_script import TranscriptScript

ROOT = Path(__file__).resolve().parent.parent
UNSET = "VM_TEST_STT_KEY_NOT_SET"
HEARD = "what is the weather like today"


def listening(folder: Path, stt: str) -> Path:
    path = write_pipeline(folder, "ears", SHORT_REPLY)
    path.write_text(path.read_text() + f'\n[stt]\n{stt}\n\n[endpoint]\necho = "aec"\n')
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in (UNSET, "DEEPGRAM_API_KEY", "DEEPGRAM_BASE_URL", "VOICE_MEMBRANE_TOKEN"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "voice_membrane.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_serve_and_run_refuse_an_stt_key_variable_that_is_not_set(tmp_path: Path) -> None:
    path = listening(tmp_path, f'spec = "deepgram:nova-3"\napi_key_env = "{UNSET}"')
    served = cli("serve", "--pipeline", str(path), "--port", "0")
    assert served.returncode == 1, served.stdout + served.stderr
    assert "listening on" not in served.stdout
    (line,) = served.stderr.splitlines()
    assert line == (
        f"voice-membrane serve: pipeline ears: stt 'deepgram:nova-3': api_key_env names "
        f"{UNSET}, which is not set"
    )
    # run --input: the same check, before any model loads.
    wav = ROOT / "audio_fixtures" / "listening" / "weather.wav"
    ran = cli("run", "--pipeline", str(path), "--input", str(wav))
    assert ran.returncode != 0 and "Traceback" not in ran.stderr
    assert f"api_key_env names {UNSET}, which is not set" in ran.stderr


def test_openai_transcription_refuses_a_websocket_base_url_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "o" * 32)
    path = listening(
        tmp_path, 'spec = "openai:gpt-4o-mini-transcribe"\nbase_url = "ws://127.0.0.1:9"'
    )
    with pytest.raises(ConfigError) as info:
        Server([path], port=0)
    assert str(info.value) == (
        "pipeline ears: stt 'openai:gpt-4o-mini-transcribe': stt.base_url "
        "'ws://127.0.0.1:9': expected an http:// or https:// URL"
    )


@pytest.mark.anyio
async def test_deepgram_on_a_websocket_base_url_hears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "dg-test-" + "w" * 32
    ears = FakeDeepgram(TranscriptScript.of(HEARD, word_s=0.2), api_key=key)
    with ears:
        monkeypatch.setenv("DEEPGRAM_API_KEY", key)
        monkeypatch.delenv("DEEPGRAM_BASE_URL", raising=False)
        assert ears.ws_url.startswith("ws://")
        path = listening(tmp_path, f'spec = "deepgram:nova-3"\nbase_url = "{ears.ws_url}"')
        async with (
            Server([path], port=0, log=lambda *a, **f: None) as server,
            connect(server.ws_url) as ws,
        ):
            await start(ws, pipeline="ears", input_audio={"encoding": "pcm16"})
            question = np.concatenate([silence(0.3), clip("weather")])
            got = await speak(ws, question, until=lambda r: bool(r.of("turn.started")))
        assert got.of("turn.started")[0]["text"] == HEARD
        assert not got.of("error")

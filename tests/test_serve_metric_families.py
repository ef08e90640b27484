"""/metrics of one serve process: the families operators size and alert on
(docs/metrics.md), filled by real turns against the fake OpenAI API; and how
``--workers auto`` sizes a group."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.serve_helpers import read_turn, send, session, write_pipeline
from tests.test_serve_drain import get
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.server import Server
from voice_membrane.server.prometheus import retry_labels
from voice_membrane.server.run import workers_wanted
from voice_membrane.server.workers import WORKER_ENV, auto_workers
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.fake_openai_speech import FakeOpenAISpeech
from voice_membrane.testing.fake_speech import SpeechScript
from voice_membrane.testing.script import ScriptedReply

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parent.parent


def value(text: str, sample: str) -> float:
    """One sample's value, by its name and labels as exposed."""
    match = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.MULTILINE)
    assert match, f"{sample} not in\n{text}"
    return float(match.group(1))


async def test_stage_latencies_retries_errors_and_audio_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    replies = (
        ScriptedReply.http_error(429),  # retried: the turn goes on
        ScriptedReply.of("It is clear now."),
        ScriptedReply.http_error(401, message="bad key"),  # ends the second turn
    )
    with FakeOpenAI(*replies) as chat:
        path = tmp_path / "cloud.toml"
        path.write_text(
            f'[llm]\nspec = "openai:gpt-test"\nbase_url = "{chat.base_url}"\n\n'
            '[tts]\nspec = "espeak"\n\n[sink]\nkind = "null"\n'
        )
        async with (
            Server([path], port=0, log=lambda *a, **k: None) as server,
            session(server) as ws,
        ):
            await send(ws, type="user.message", text="Weather?")
            first = await read_turn(ws)
            await send(ws, type="user.message", text="And tomorrow?")
            second = await read_turn(ws)
            text = (await get(server.url + "/metrics"))[2].decode()
    assert first.end["heard"] == "It is clear now." and second.end["error"]
    assert value(text, "voice_membrane_llm_first_token_seconds_count") == 1
    assert value(text, "voice_membrane_tts_first_byte_seconds_count") == 1
    assert value(text, "voice_membrane_first_audio_seconds_count") == 1
    assert value(text, 'voice_membrane_llm_retries_total{kind="rate_limit",vendor="openai"}') == 1
    assert value(text, 'voice_membrane_llm_errors_total{kind="auth",vendor="openai"}') == 1
    assert value(text, "voice_membrane_active_turns") == 0
    spoken = sum(len(frame[2]) for frame in first.frames) / 2 / 24000  # pcm16 at 24 kHz
    streamed = value(text, "voice_membrane_audio_streamed_seconds_total")
    assert streamed == pytest.approx(spoken, abs=0.03)
    assert value(text, "process_resident_memory_bytes") > 0  # this process's own
    assert value(text, "process_cpu_seconds_total") > 0


async def test_tts_retries_and_errors_by_vendor_and_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = (
        SpeechScript.http_error(429, retry_after=0.01),  # retried: the turn is spoken
        SpeechScript(),
        SpeechScript.http_error(401),  # ends the second turn's speech
    )
    with FakeOpenAISpeech(*scripts) as voice:
        for name, setting in voice.env().items():
            monkeypatch.setenv(name, setting)
        path = write_pipeline(tmp_path, "short", "Hi there.", tts="openai:alloy")
        async with (
            Server([path], port=0, log=lambda *a, **k: None) as server,
            session(server) as ws,
        ):
            await send(ws, type="user.message", text="Hello")
            first = await read_turn(ws)
            await send(ws, type="user.message", text="Again")
            second = await read_turn(ws)
            text = (await get(server.url + "/metrics"))[2].decode()
    assert first.end["heard"] == "Hi there." and second.end["error"]
    assert value(text, 'voice_membrane_tts_retries_total{kind="rate_limit",vendor="openai"}') == 1
    assert value(text, 'voice_membrane_tts_errors_total{kind="auth",vendor="openai"}') == 1
    assert "voice_membrane_llm_errors_total{" not in text  # the LLM did not fail
    report = next(e for e in second.events if e["type"] == "metrics")["report"]
    assert report["tts_stream"]["error"] == "auth"


async def test_active_turns_counts_a_running_turn(tmp_path: Path) -> None:
    from tests.serve_helpers import running_server

    async with running_server(tmp_path) as server, session(server, pipeline="long") as ws:
        await send(ws, type="user.message", text="Weather?")
        while not isinstance(await ws.recv(), bytes):
            pass  # speaking now
        text = (await get(server.url + "/metrics"))[2].decode()
        assert value(text, "voice_membrane_active_turns") == 1
        await send(ws, type="interrupt")
        await read_turn(ws)
        text = (await get(server.url + "/metrics"))[2].decode()
        assert value(text, "voice_membrane_active_turns") == 0


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # plain tests: no event loop used
def test_retry_lines_become_labels(anyio_backend: str) -> None:
    line = "anthropic: overloaded (HTTP 529): Overloaded (waited 0.20 s)"
    assert retry_labels(line, "x") == ("anthropic", "overloaded")
    assert retry_labels("openai: connection: refused (waited 1.00 s)", "x") == (
        "openai",
        "connection",
    )
    # Free text never becomes a label value.
    assert retry_labels("something odd happened", "gemini") == ("gemini", "other")
    assert retry_labels("my vendor: timeout: x", "gemini") == ("gemini", "timeout")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
def test_auto_is_one_worker_per_core_for_cloud_pipelines_only(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv(WORKER_ENV, raising=False)
    pipelines = REPO / "pipelines"
    for embedded in ("local.toml", "local-voice.toml", "replay.toml", "openai.toml"):
        assert workers_wanted("auto", [pipelines / embedded]) == 1, embedded
    for cloud in ("elevenlabs.toml", "deepgram-voice.toml"):
        assert workers_wanted("auto", [pipelines / cloud]) == cores, cloud
    mixed = {p: load_pipeline(pipelines / p) for p in ("elevenlabs.toml", "local.toml")}
    assert auto_workers(mixed) == 1  # one embedded pipeline decides
    hears_here = load_pipeline(pipelines / "deepgram-voice.toml").with_overrides(
        {"stt": {"spec": "pocketsphinx"}}
    )
    assert auto_workers({"voice": hears_here}) == 1  # a local recognizer too
    assert workers_wanted(3, [pipelines / "local.toml"]) == 3  # asked for: as asked
    monkeypatch.setenv(WORKER_ENV, "w2")
    assert workers_wanted(3, [pipelines / "elevenlabs.toml"]) == 1  # a worker is one process

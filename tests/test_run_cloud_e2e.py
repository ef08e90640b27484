"""`voice-membrane run --llm VENDOR:MODEL` end to end: the command line (a
subprocess) talks through the vendor's official SDK to its fake server, found
through the SDK's environment variables, and speaks only the visible text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf
from vendors import VENDORS, Vendor

from voice_membrane.testing.script import Fault, ScriptedReply, text, thinking
from voice_membrane.testing.speech_check import analyze_speech, speech_problems

CLI = [sys.executable, "-m", "voice_membrane.cli"]
ANSWER = "The sky looks blue because air scatters blue light the most."
PLAN = "Rayleigh scattering, keep it short."


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **env}
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"):
        if name not in env:
            full_env.pop(name, None)
    return subprocess.run(
        [*CLI, "run", *args], env=full_env, capture_output=True, text=True, timeout=120
    )


def one_shot(wav: Path) -> list[str]:
    """``run`` arguments for one Anthropic turn spoken by espeak into ``wav``."""
    return [
        "--llm",
        "anthropic:claude-test",
        "--tts",
        "espeak",
        "--out",
        str(wav),
        "--prompt",
        "hi",
    ]


# Prefill mode per vendor: the format each one continues best.
PREFILL = {"anthropic": "anthropic-xml", "openai": "completions", "gemini": "gemini-prefill"}
MODES = [(vendor, mode) for vendor in VENDORS for mode in ("chat", "prefill")]


@pytest.mark.parametrize(("vendor", "mode"), MODES, ids=[f"{v.name}-{m}" for v, m in MODES])
def test_run_speaks_only_the_visible_text(tmp_path: Path, vendor: Vendor, mode: str) -> None:
    wav, events = tmp_path / "a.wav", tmp_path / "e.jsonl"
    if mode == "chat":
        formatter = "native"
        reply = ScriptedReply.of(thinking(PLAN), text(ANSWER), delta_chars=6)
    else:
        formatter = PREFILL[vendor.name]
        reply = ScriptedReply.of(f"<thinking>{PLAN}</thinking>{ANSWER}", delta_chars=6)
    with vendor.server(reply) as server:
        done = run_cli(
            [
                "--llm",
                f"{vendor.name}:{vendor.model}",
                "--formatter",
                formatter,
                "--tts",
                "espeak",
                "--out",
                str(wav),
                "--events-jsonl",
                str(events),
                "--prompt",
                "Why is the sky blue?",
            ],
            server.env(),
        )
        (request,) = server.requests
    assert done.returncode == 0, done.stderr
    body = json.dumps(request.body)
    assert "Why is the sky blue?" in body
    # Prefill mode sends a transcript the model continues; chat mode sends roles.
    assert ("User: Why is the sky blue?" in body) == (mode == "prefill")
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    spoken = " ".join(line["text"] for line in lines if line["event"] == "tts_input")
    assert spoken.split() == ANSWER.split()
    hidden = [line for line in lines if line["event"] == "chunk" and not line["meta"]["visible"]]
    assert "".join(line["text"] for line in hidden) == PLAN
    samples, rate = sf.read(wav, dtype="int16")
    assert speech_problems(analyze_speech(samples, rate), ANSWER) == []
    assert "first audio" in done.stdout


def test_a_provider_error_is_reported_and_what_was_said_is_kept(tmp_path: Path) -> None:
    vendor = VENDORS[0]
    reply = ScriptedReply.of(
        text("Hello there, friend. And more words that never arrive."),
        delta_chars=4,
        fault=Fault("drop", after_deltas=6),
    )
    with vendor.server(reply) as server:
        done = run_cli(
            one_shot(tmp_path / "a.wav"),
            server.env(),
        )
    assert done.returncode == 1, done.stderr  # the turn failed …
    assert "Hello there, friend." in done.stdout  # … what came before it was spoken
    assert "error: anthropic: connection" in done.stdout


def test_a_missing_key_is_one_clear_line(tmp_path: Path) -> None:
    env = {"ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    done = run_cli(
        one_shot(tmp_path / "a.wav"),
        env,
    )
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip() == (
        "voice-membrane run: llm 'anthropic:claude-test': no API key: set ANTHROPIC_API_KEY "
        "(or name another variable with llm.api_key_env)"
    )


def test_a_refused_request_says_so_and_that_no_audio_was_made(tmp_path: Path) -> None:
    vendor = VENDORS[0]
    wav = tmp_path / "a.wav"
    with vendor.server(ScriptedReply.http_error(400, message="max_tokens: too large")) as server:
        done = run_cli(
            one_shot(wav),
            server.env(),
        )
    assert done.returncode == 1, done.stderr
    assert "error: anthropic: bad_request (HTTP 400): max_tokens: too large" in done.stdout
    assert f"no audio was produced: {wav} holds no sound" in done.stdout

"""Helpers for the resume tests: a pipeline on the fake OpenAI API (which records
each request, so a test sees the history a resumed session sends), and the
protocol's resume message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from websockets.asyncio.client import ClientConnection

from tests.serve_helpers import GUARD_S, next_event
from voice_membrane.server import Server
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import ScriptedReply

KEY_ENV = "RESUME_TEST_KEY"
REPO = Path(__file__).resolve().parent.parent


def cloud_pipeline(folder: Path, base_url: str, name: str = "chat") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(
        f'[llm]\nspec = "openai:gpt-test"\nbase_url = "{base_url}"\n'
        f'api_key_env = "{KEY_ENV}"\nmax_tokens = 300\n\n'
        '[tts]\nspec = "espeak"\n\n[sink]\nkind = "null"\n',
        encoding="utf-8",
    )
    return path


async def resume(ws: ClientConnection, started: dict[str, Any], **fields: Any) -> None:
    message = {
        "type": "session.resume",
        "session": started["session"],
        "resume_token": started["resume_token"],
        **fields,
    }
    await ws.send(json.dumps(message))


async def resumed(ws: ClientConnection, started: dict[str, Any]) -> dict[str, Any]:
    await resume(ws, started)
    event = await next_event(ws)
    assert event["type"] == "session.resumed", event
    return event


def texts(request_body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of each message of a chat request, the system prompt left out."""
    out = []
    for message in request_body["messages"]:
        content = message["content"]
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        if message["role"] != "system":
            out.append((message["role"], content))
    return out


@asynccontextmanager
async def serving(
    folder: Path, *replies: ScriptedReply, **options: Any
) -> AsyncIterator[tuple[FakeOpenAI, Server]]:
    """A server in process on a ``cloud_pipeline`` to a fake OpenAI API."""
    options.setdefault("log", lambda *args, **fields: None)
    with FakeOpenAI(*replies) as llm:
        async with Server([cloud_pipeline(folder, llm.base_url)], port=0, **options) as server:
            yield llm, server


def serve_process(pipeline: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), KEY_ENV: "k"}
    env.pop("VOICE_MEMBRANE_TOKEN", None)
    command = [sys.executable, "-m", "voice_membrane.cli", "serve", "--pipeline", str(pipeline)]
    return subprocess.Popen(
        [*command, "--port", "0", "--log-format", "json", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


async def ws_url(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    with anyio.fail_after(GUARD_S):
        line = await anyio.to_thread.run_sync(process.stdout.readline)
    assert line.startswith("listening on http://127.0.0.1:"), line
    return "ws" + line.split()[-1].removeprefix("http") + "/v1/session"


def stop_processes(*processes: subprocess.Popen[str]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()

"""Helpers for the serve tests: short recorded pipelines and a protocol client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from websockets.asyncio.client import ClientConnection, connect

from voice_membrane.server import Server
from voice_membrane.server.protocol import unpack_frame

# Thinking (hidden), then a short spoken answer with markdown (filtered from speech).
SHORT_REPLY = "<thinking>The user greets me.</thinking>Hi! It is **clear** now."
SHORT_VISIBLE = "Hi! It is **clear** now."
SHORT_SPOKEN = "Hi! It is clear now."
# Long enough to interrupt mid-speech (about ten seconds of espeak-ng).
LONG_REPLY = (
    "Here is a long answer about the weather. The morning will be cool and bright, "
    "with a light wind from the west. Around noon some clouds will come in from the "
    "sea, and by the afternoon there may be a short shower. The evening should clear "
    "again, so it is a good time for a walk along the river before dinner."
)
GUARD_S = 30  # against a hang only; the machine is shared and loaded


def write_pipeline(folder: Path, name: str, reply: str, *, tts: str = "espeak") -> Path:
    recording = folder / f"{name}.jsonl"
    header = {"format": "voice-membrane-replay", "version": 1, "mode": "prefill"}
    lines = [json.dumps(header)]
    # A delta every few characters, all at once (replay_speed 0): the audio's
    # real-time pace is what a turn takes.
    for i in range(0, len(reply), 7):
        lines.append(json.dumps({"t_ms": i, "text": reply[i : i + 7]}))
    recording.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path = folder / f"{name}.toml"
    path.write_text(
        f'[llm]\nspec = "replay:{recording}"\nreplay_speed = 0\n\n'
        f'[tts]\nspec = "{tts}"\n\n[sink]\nkind = "null"\n',
        encoding="utf-8",
    )
    return path


def listening_pipeline(folder: Path, name: str, reply: str) -> Path:
    """A recorded reply (spoken by espeak), with the embedded recognizer listening:
    one that can take a phone call."""
    path = write_pipeline(folder, name, reply)
    path.write_text(
        path.read_text() + '\n[stt]\nspec = "pocketsphinx"\n\n[vad]\nengine = "silero"\n'
    )
    return path


def pipelines(folder: Path) -> list[Path]:
    return [
        write_pipeline(folder, "short", SHORT_REPLY),
        write_pipeline(folder, "long", LONG_REPLY),
    ]


@asynccontextmanager
async def running_server(folder: Path, **options: Any) -> AsyncIterator[Server]:
    options.setdefault("log", lambda *args, **fields: None)
    async with Server(pipelines(folder), port=0, **options) as server:
        yield server


@dataclass
class TurnLog:
    """What a client received during one turn."""

    events: list[dict[str, Any]] = field(default_factory=list)
    frames: list[tuple[int, int, bytes]] = field(default_factory=list)  # turn, sequence, audio

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    @property
    def end(self) -> dict[str, Any]:
        return self.of("turn.end")[0]


async def start(ws: ClientConnection, **fields: Any) -> dict[str, Any]:
    await ws.send(json.dumps({"type": "session.start", **fields}))
    started = json.loads(await ws.recv())
    assert started["type"] == "session.started", started
    return dict(started)


async def send(ws: ClientConnection, **message: Any) -> None:
    await ws.send(json.dumps(message))


async def next_event(ws: ClientConnection) -> dict[str, Any]:
    """The next JSON event, skipping audio frames."""
    with anyio.fail_after(GUARD_S):
        while True:
            data = await ws.recv()
            if isinstance(data, str):
                return dict(json.loads(data))
    raise AssertionError("unreachable")


async def read_turn(ws: ClientConnection, log: TurnLog | None = None) -> TurnLog:
    """Everything up to and including ``turn.end``."""
    log = log or TurnLog()
    with anyio.fail_after(GUARD_S):
        while True:
            data = await ws.recv()
            if isinstance(data, bytes):
                log.frames.append(unpack_frame(data))
                continue
            event = json.loads(data)
            log.events.append(event)
            if event["type"] == "turn.end":
                return log


@asynccontextmanager
async def session(server: Server, **start_fields: Any) -> AsyncIterator[ClientConnection]:
    async with connect(server.ws_url) as ws:
        await start(ws, **start_fields)
        yield ws

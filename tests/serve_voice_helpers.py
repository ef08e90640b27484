"""Helpers for the tests of served sessions that listen: a pipeline that hears
(pocketsphinx) and replies from a recording (espeak-ng), and a client that
speaks real fixture audio in real time while it records what it receives."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import soundfile as sf
from serve_helpers import LONG_REPLY, SHORT_REPLY, write_pipeline
from websockets.asyncio.client import ClientConnection

from voice_membrane.server.protocol import unpack_frame
from voice_membrane.vocab.audio import Samples

ROOT = Path(__file__).resolve().parent.parent
LISTENING = ROOT / "audio_fixtures" / "listening"
RATE = 16000
FRAME = RATE * 20 // 1000


def listening_pipeline(folder: Path, name: str, reply: str = LONG_REPLY) -> Path:
    """A recorded reply (``reply``) to whatever is heard, by pocketsphinx."""
    path = write_pipeline(folder, name, reply)
    path.write_text(
        path.read_text() + '\n[stt]\nspec = "pocketsphinx"\n\n[endpoint]\necho = "aec"\n'
    )
    return path


def listening_pipelines(folder: Path) -> list[Path]:
    return [
        listening_pipeline(folder, "voice"),
        listening_pipeline(folder, "brief", SHORT_REPLY),
        write_pipeline(folder, "deaf", SHORT_REPLY),  # no [stt]
    ]


def clip(name: str) -> Samples:
    samples, rate = sf.read(LISTENING / f"{name}.wav", dtype="int16")
    assert rate == RATE
    return np.asarray(samples, dtype=np.int16)


def silence(seconds: float) -> Samples:
    return np.zeros(round(seconds * RATE), dtype=np.int16)


@dataclass
class Received:
    events: list[dict[str, Any]] = field(default_factory=list)
    frames: list[tuple[int, int, bytes]] = field(default_factory=list)
    at: list[float] = field(default_factory=list)  # each event's time since the start

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def turn_end(self, n: int) -> dict[str, Any] | None:
        return next((e for e in self.of("turn.end") if e["turn"] == n), None)


async def speak(
    ws: ClientConnection,
    audio: Samples,
    *,
    until: Callable[[Received], bool] | None = None,
    guard_s: float = 60.0,
) -> Received:
    """Send ``audio`` in 20 ms frames in real time while recording what comes
    back. With ``until``: then silence (so the listener's time goes on) until
    ``until(received)``; without: until the audio is sent."""
    got = Received()
    done = anyio.Event()
    t0 = time.monotonic()

    async def send() -> None:
        n = 0
        while not done.is_set():
            start = n * FRAME
            piece = audio[start : start + FRAME] if start < len(audio) else None
            if piece is None or len(piece) == 0:
                if until is None:
                    done.set()
                    tg.cancel_scope.cancel()
                    return
                piece = silence(0.02)
            await ws.send(piece.tobytes())
            n += 1
            await anyio.sleep(max(0.0, t0 + n * 0.02 - time.monotonic()))

    async def receive() -> None:
        while until is None or not until(got):
            data = await ws.recv()
            if isinstance(data, bytes):
                got.frames.append(unpack_frame(data))
            else:
                got.events.append(json.loads(data))
                got.at.append(time.monotonic() - t0)
        done.set()

    with anyio.fail_after(guard_s):
        async with anyio.create_task_group() as tg:
            tg.start_soon(send)
            await receive()
            tg.cancel_scope.cancel()
    return got

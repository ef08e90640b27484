"""An attacker's binary frames on /v1/session: frames that are not audio (empty,
half a sample, over 200 ms), audio to a session that does not listen, and valid
frames of one sample each. Each flood is closed (1008 ``rate_limited``, as a flood
of text is) within a bounded number of frames, whatever their pace: bad frames
count as messages (20 a second), and a valid frame costs at least 10 ms of the
audio budget. A short last frame of real audio is still heard."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import soundfile as sf
from serve_helpers import GUARD_S, next_event, send, start
from serve_voice_helpers import listening_pipelines, silence
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from voice_membrane.server import Server
from voice_membrane.server.protocol import MIN_INPUT_FRAME_S
from voice_membrane.server.voice_input import AUDIO_BURST_S, AUDIO_PATIENCE_S

pytest.importorskip("pocketsphinx")
pytestmark = pytest.mark.anyio

VOICE_IN = {"encoding": "pcm16", "sample_rate": 16000, "frame_ms": 20}
# Bad frames: the 20 a message limit allows at once, then 20 more refused, then closed.
BAD_FLOOD = 200
# One-sample frames: the burst's worth at 10 ms each, then the patience's, then closed.
TINY_FLOOD = 2 * round((AUDIO_BURST_S + AUDIO_PATIENCE_S) / MIN_INPUT_FRAME_S)


async def flooded(ws: ClientConnection, frame: bytes, count: int) -> tuple[int | None, list[str]]:
    """Send ``frame`` ``count`` times as fast as the socket takes them; the close
    code the server gave and the error codes it sent before it. Never returns if
    the server does not close (the guard fails the test)."""
    codes: list[str] = []
    with anyio.fail_after(GUARD_S):
        with contextlib.suppress(ConnectionClosed):
            for _ in range(count):
                await ws.send(frame)
            while True:
                data = await ws.recv()
                if isinstance(data, str) and (event := json.loads(data))["type"] == "error":
                    codes.append(event["code"])
        with contextlib.suppress(ConnectionClosed):  # (the close came while sending)
            while True:
                data = await ws.recv()
                if isinstance(data, str) and (event := json.loads(data))["type"] == "error":
                    codes.append(event["code"])
    return ws.close_code, codes


def _server(folder: Path, **options: Any) -> Server:
    options.setdefault("log", lambda *args, **fields: None)
    return Server(listening_pipelines(folder), port=0, **options)


@pytest.mark.parametrize(
    ("frame", "pipeline"),
    [
        (b"\x01", "brief"),  # half a sample
        (b"", "brief"),  # empty
        (b"\x00" * 60_000, "brief"),  # 1.9 s: over the 200 ms a frame holds
        (silence(0.02).tobytes(), "deaf"),  # good audio, to a session that takes none
    ],
    ids=["odd", "empty", "oversized", "no_listen"],
)
async def test_a_flood_of_bad_frames_is_closed_like_a_flood_of_messages(
    tmp_path: Path, frame: bytes, pipeline: str
) -> None:
    async with _server(tmp_path) as server, connect(server.ws_url) as ws:
        await start(ws, pipeline=pipeline, input_audio=VOICE_IN)
        code, errors = await flooded(ws, frame, BAD_FLOOD)
    assert code == 1008 and ws.close_reason == "rate_limited"
    assert errors == ["bad_message", "rate_limited"]  # each told once, not per frame


async def test_a_few_bad_frames_are_answered_and_the_session_goes_on(tmp_path: Path) -> None:
    async with _server(tmp_path) as server, connect(server.ws_url) as ws:
        await start(ws, pipeline="brief", input_audio=VOICE_IN)
        for _ in range(10):  # (within the 20 messages a second)
            await ws.send(b"\x01")
        error = await next_event(ws)
        assert error["code"] == "bad_message" and "even number of bytes" in error["message"]
        await send(ws, type="session.end")
        with anyio.fail_after(GUARD_S), contextlib.suppress(ConnectionClosed):
            while True:
                data = await ws.recv()
                if isinstance(data, str):
                    assert json.loads(data)["type"] != "error", data
    assert ws.close_code == 1000


async def test_a_flood_of_one_sample_frames_cannot_pass_its_budget(tmp_path: Path) -> None:
    """Each valid, but each costing the server a frame's work for 1/16000 s of
    audio: charged 10 ms apiece, refused past the burst, then closed."""
    async with _server(tmp_path) as server, connect(server.ws_url) as ws:
        await start(ws, pipeline="brief", input_audio=VOICE_IN)
        code, errors = await flooded(ws, b"\x01\x00", TINY_FLOOD)
    assert code == 1008 and ws.close_reason == "rate_limited"
    assert errors == ["rate_limited"]


async def test_a_short_last_frame_is_heard(tmp_path: Path) -> None:
    """A file's last piece (3 samples) after real-time frames: taken, recorded,
    no error."""
    folder = tmp_path / "heard"
    rng = np.random.default_rng(7)
    audio = (rng.standard_normal(16000 + 3) * 30).astype(np.int16)
    async with _server(tmp_path, debug_audio_dir=folder) as server:
        async with connect(server.ws_url) as ws:
            started = await start(ws, pipeline="brief", input_audio=VOICE_IN)
            for at in range(0, len(audio), 320):
                await ws.send(audio[at : at + 320].tobytes())
                await anyio.sleep(0.02)
            await send(ws, type="session.end")
            with anyio.fail_after(GUARD_S), contextlib.suppress(ConnectionClosed):
                while True:
                    data = await ws.recv()
                    if isinstance(data, str):
                        assert json.loads(data)["type"] != "error", data
        with anyio.fail_after(GUARD_S):
            while server.state is not None and server.state.sessions:
                await anyio.sleep(0.05)
    written, _ = sf.read(folder / f"{started['session']}.wav", dtype="int16")
    np.testing.assert_array_equal(written, audio)

"""serve: sessions cannot hurt each other — a client that stops reading, a client
that disconnects mid-turn — and the embedded model shared by two sessions."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.serve_helpers import (
    GUARD_S,
    SHORT_SPOKEN,
    TurnLog,
    read_turn,
    running_server,
    send,
    session,
    start,
)
from voice_membrane.server import Server

pytestmark = pytest.mark.anyio


def small_socket(server: Server, receive_buffer: int = 4096) -> socket.socket:
    """A client socket with a small kernel receive buffer: a client that stops
    reading makes the server wait within a second of audio, not minutes."""
    address = urlsplit(server.url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect((address.hostname, address.port))
    sock.setblocking(False)
    return sock


async def test_a_client_that_stops_reading_is_dropped_and_others_go_on(tmp_path: Path) -> None:
    events: list[tuple[str, dict[str, object]]] = []
    async with running_server(
        tmp_path,
        max_queued_audio_s=0.3,
        send_buffer_s=0.05,
        log=lambda event, **fields: events.append((event, fields)),
    ) as server:
        assert server.state is not None
        metrics = server.state.metrics
        slow_events: list[dict[str, object]] = []
        calm: dict[str, TurnLog] = {}

        async def slow() -> None:
            async with connect(
                server.ws_url, sock=small_socket(server), max_queue=1, open_timeout=GUARD_S
            ) as ws:
                await start(ws, pipeline="long", audio={"sample_rate": 48000})
                await send(ws, type="user.message", text="Weather?")
                with anyio.fail_after(GUARD_S):  # stop reading until the server gives up
                    while metrics.dropped._value.get() == 0:
                        await anyio.sleep(0.05)
                try:
                    while True:
                        data = await ws.recv()
                        if isinstance(data, str):
                            slow_events.append(json.loads(data))
                except ConnectionClosed:
                    pass
                calm["slow_code"] = ws.close_code  # type: ignore[assignment]

        async def normal() -> None:
            await anyio.sleep(0.5)  # while the slow client is stalled
            async with session(server, pipeline="short") as ws:
                await send(ws, type="user.message", text="Hi!")
                calm["log"] = await read_turn(ws)

        with anyio.fail_after(GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(slow)
                tg.start_soon(normal)
        assert calm["slow_code"] == 1008  # type: ignore[comparison-overlap]
        assert [e["code"] for e in slow_events if e["type"] == "error"] == ["slow_client"]
        assert calm["log"].end["heard"] == SHORT_SPOKEN
        assert metrics.dropped._value.get() == 1
        assert any(event == "dropped" for event, _ in events)


async def test_a_client_that_disconnects_mid_turn_cancels_its_work(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server:
        assert server.state is not None
        baseline = len(asyncio.all_tasks())
        async with connect(server.ws_url) as ws:
            await start(ws, pipeline="long")
            await send(ws, type="user.message", text="Weather?")
            with anyio.fail_after(GUARD_S):
                while not isinstance(await ws.recv(), bytes):
                    pass  # the turn is speaking
            assert server.state.turns_running == 1
        # Gone: the turn is cancelled at once, long before its ~15 s of audio.
        with anyio.fail_after(5):
            while server.state.turns_running or server.state.sessions:
                await anyio.sleep(0.02)
            while len(asyncio.all_tasks()) > baseline:
                await anyio.sleep(0.02)


async def test_two_sessions_on_the_embedded_model_at_once(tmp_path: Path) -> None:
    """One llama.cpp model for the process, one generation at a time on its one
    thread: two sessions asking together both get whole, sensible replies."""
    pytest.importorskip("llama_cpp")
    pipeline = tmp_path / "embedded.toml"
    pipeline.write_text(
        '[llm]\nspec = "local"\nmax_tokens = 24\ntemperature = 0\n\n'
        '[tts]\nspec = "espeak"\n\n[sink]\nkind = "null"\n',
        encoding="utf-8",
    )
    logs: dict[int, TurnLog] = {}
    async with Server([pipeline], port=0, log=lambda *a, **k: None) as server:

        async def one(i: int, text: str) -> None:
            async with session(server) as ws:
                await send(ws, type="user.message", text=text)
                logs[i] = await read_turn(ws)

        with anyio.fail_after(GUARD_S * 2):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, 0, "What is the capital of France?")
                tg.start_soon(one, 1, "Name a colour of the sky.")
    for log in logs.values():
        end = log.end
        assert end["error"] is None and not end["interrupted"]
        assert len(end["visible"].split()) >= 3
        assert end["heard"] == "".join(e["text"] for e in log.of("transcript.delta")).strip()
        assert [seq for _, seq, _ in log.frames] == list(range(len(log.frames)))
    assert logs[0].end["visible"] != logs[1].end["visible"]  # no reply got the other's tokens

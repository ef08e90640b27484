"""serve notices a client that stops reading within about the documented time, at
any sample rate: a real TCP client, its buffers as its system gives them, that
opens a session, asks for a long reply and then never reads again.

Before, its kernel's buffers (the server's autotuned to 4 MiB, the client's
growing to hundreds of KB) held tens of seconds of audio first: at 8 kHz the
stall was only found by websockets' keepalive, after 40 s.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.uri import parse_uri

from tests.serve_helpers import GUARD_S, LONG_REPLY, send, start, write_pipeline
from voice_membrane.server import Server
from voice_membrane.server.socket_sink import LEAD_S
from voice_membrane.server.state import MAX_QUEUED_AUDIO_S

pytestmark = pytest.mark.anyio

# A guard against a hang, derived from the documented bound (about 2 s of audio
# waiting beyond the lead): generous for a loaded machine, far below the 40 s
# the stall took to be noticed before.
NOTICED_WITHIN_S = 2 * (MAX_QUEUED_AUDIO_S + LEAD_S) + 3


def stalled_client(url: str, audio: dict[str, Any]) -> socket.socket:
    """Open a session over a plain socket, ask for a reply, and read no more."""
    uri = parse_uri(url)
    sock = socket.create_connection((uri.host, uri.port), timeout=GUARD_S)
    protocol = ClientProtocol(uri)

    def send(text: str | None = None) -> None:
        if text is not None:
            protocol.send_text(text.encode())
        for data in protocol.data_to_send():
            sock.sendall(data)

    def receive_text() -> str:
        while True:
            for event in protocol.events_received():
                if isinstance(event, Frame) and event.opcode is Opcode.TEXT:
                    return event.data.decode()
            protocol.receive_data(sock.recv(4096))

    protocol.send_request(protocol.connect())
    send()
    while protocol.handshake_exc is None and protocol.state.name == "CONNECTING":
        protocol.receive_data(sock.recv(4096))
    assert protocol.handshake_exc is None
    send(json.dumps({"type": "session.start", "audio": audio}))
    assert json.loads(receive_text())["type"] == "session.started"
    send(json.dumps({"type": "user.message", "text": "Tell me about the weather."}))
    return sock


def server_socket(server: Server) -> socket.socket:
    """The server's side of its one connection."""
    assert server._ws is not None
    (connection,) = server._ws.connections
    sock: socket.socket = connection.transport.get_extra_info("socket")
    return sock


def on_the_wire(encoding: str, rate: int) -> int:
    """Bytes a second of a session's audio: 50 frames of 20 ms, each with its 8-byte
    header and a 4-byte WebSocket header."""
    per_frame = rate // 50 * (1 if encoding == "mulaw" else 2)
    return 50 * (per_frame + 8 + 4)


@pytest.mark.parametrize(
    "audio", [{"encoding": "mulaw", "sample_rate": 8000}, {"sample_rate": 48000}]
)
async def test_a_client_that_stops_reading_is_noticed_in_seconds(
    tmp_path: Path, audio: dict[str, Any]
) -> None:
    noticed = anyio.Event()

    def log(event: str, **fields: Any) -> None:
        if event == "dropped" and fields.get("reason") == "slow_client":
            noticed.set()

    long = write_pipeline(tmp_path, "long", LONG_REPLY * 3)  # ~30 s of speech
    async with Server([long], port=0, log=log) as server:
        sock = await anyio.to_thread.run_sync(stalled_client, server.ws_url, audio)
        try:
            asked = time.monotonic()
            with anyio.fail_after(NOTICED_WITHIN_S):
                await noticed.wait()
            assert time.monotonic() - asked < NOTICED_WITHIN_S
            assert server.state is not None
            assert server.state.metrics.dropped._value.get() == 1
        finally:
            sock.close()


@pytest.mark.parametrize(
    ("audio", "send_buffer_s"),
    [
        ({"sample_rate": 16000}, None),  # the default: the lead
        ({"sample_rate": 48000}, None),
        ({"encoding": "mulaw", "sample_rate": 8000}, 1.0),
    ],
)
async def test_the_send_buffer_holds_the_configured_audio(
    tmp_path: Path, audio: dict[str, Any], send_buffer_s: float | None
) -> None:
    options = {} if send_buffer_s is None else {"send_buffer_s": send_buffer_s}
    seconds = LEAD_S if send_buffer_s is None else send_buffer_s
    short = write_pipeline(tmp_path, "short", "Hi.")
    async with Server([short], port=0, log=lambda *a, **k: None, **options) as server:
        sock = await anyio.to_thread.run_sync(stalled_client, server.ws_url, audio)
        try:
            size = server_socket(server).getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        finally:
            sock.close()
    expected = round(seconds * on_the_wire(audio.get("encoding", "pcm16"), audio["sample_rate"]))
    assert size == 2 * expected  # Linux doubles it for its bookkeeping


async def test_a_client_that_reads_at_playback_pace_is_not_dropped(tmp_path: Path) -> None:
    """The other side: a client that takes each frame only when the one before has
    played (a phone bridge, reading no further ahead) keeps its session."""
    dropped: list[dict[str, Any]] = []
    long = write_pipeline(tmp_path, "long", LONG_REPLY)
    log = lambda event, **fields: dropped.append(fields) if event == "dropped" else None  # noqa: E731
    async with (
        Server([long], port=0, log=log) as server,
        connect(server.ws_url, max_queue=1) as ws,
    ):
        await start(ws, audio={"encoding": "mulaw", "sample_rate": 8000})
        await send(ws, type="user.message", text="Weather?")
        played = 0
        began = time.monotonic()
        with anyio.fail_after(GUARD_S * 2):
            while True:
                data = await ws.recv()
                if isinstance(data, bytes):
                    played += 1  # the next frame is taken once this one has played
                    await anyio.sleep(max(0.0, began + played * 0.02 - time.monotonic()))
                elif json.loads(data)["type"] == "turn.end":
                    break
        assert played > 5 / 0.02  # seconds of speech, paced
    assert dropped == []

"""The client's pace, not the server's: a client streaming its voice in real
time loses nothing and is told nothing when the server's loop freezes (its
frames wait in the socket and are read at once), nor when its own network
holds its frames back and delivers them in a burst (mobile jitter) up to the
documented burst. Real sockets; the client runs in a thread of its own, so
it goes on sending while the server's loop is blocked. What the server heard
is its debug recording, compared sample for sample with what was sent."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import soundfile as sf
from serve_voice_helpers import listening_pipelines
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from voice_membrane.pipeline.listening import FrameInlet
from voice_membrane.server import Server
from voice_membrane.server.twilio_call_token import CALL_TOKEN_PARAMETER, CallTokens
from voice_membrane.server.voice_input import AUDIO_BURST_S
from voice_membrane.testing.fake_twilio import twilio_signature
from voice_membrane.vocab.audio import Samples, pcm16_from_ulaw, ulaw_from_pcm16

pytest.importorskip("pocketsphinx")
pytestmark = pytest.mark.anyio

RATE = 16000
PHONE_RATE, PHONE_FRAME = 8000, 160  # μ-law: a byte a sample; 20 ms
TWILIO_TOKEN = "twilio-auth-token-for-the-pace-tests"
TOKENS = CallTokens(TWILIO_TOKEN)
GUARD_S = 60  # against a hang only: the machine is shared and loaded


@dataclass
class Streamed:
    """What the client sent and what it was told."""

    audio: Samples
    session: str = ""
    errors: list[dict[str, Any]] = field(default_factory=list)
    close_code: int | None = None
    reached: threading.Event = field(default_factory=threading.Event)  # ``mark_s`` sent


def stream(url: str, got: Streamed, *, frame_ms: int, late: tuple[float, float]) -> None:
    """In a thread: start a listening session, send ``got.audio`` in ``frame_ms``
    frames, each at its real time, except that those due within ``late`` (from,
    to: seconds from the first) all go at its end; ``got.reached`` once
    ``late[0]`` of audio is sent; then ``session.end`` and read until closed."""
    step = RATE * frame_ms // 1000
    input_audio = {"encoding": "pcm16", "sample_rate": RATE, "frame_ms": frame_ms}
    with connect(url, open_timeout=GUARD_S) as ws:
        start = {"type": "session.start", "pipeline": "brief", "input_audio": input_audio}
        ws.send(json.dumps(start))
        started = json.loads(ws.recv(timeout=GUARD_S))
        assert started["type"] == "session.started", started
        got.session = started["session"]
        t0 = time.monotonic()
        for n, at in enumerate(range(0, len(got.audio), step)):
            due = n * frame_ms / 1000
            if late[0] <= due < late[1]:
                due = late[1]
            time.sleep(max(0.0, t0 + due - time.monotonic()))
            ws.send(got.audio[at : at + step].tobytes())
            if (n + 1) * frame_ms / 1000 >= late[0]:
                got.reached.set()
            _read(ws, got, timeout=0)
        ws.send(json.dumps({"type": "session.end"}))
        with contextlib.suppress(ConnectionClosed):
            while True:
                _read(ws, got, timeout=GUARD_S)
        got.close_code = ws.close_code


def phone_call(url: str, got: Streamed) -> None:
    """In a thread: a Twilio call (signed), ``got.audio`` (8 kHz) as 20 ms μ-law
    ``media`` in real time, ``got.reached`` after 1 s; then ``stop``."""
    url = url.replace("/v1/session", "/v1/twilio")
    signature = twilio_signature(TWILIO_TOKEN, url.replace("ws://", "wss://"))
    data = ulaw_from_pcm16(got.audio)
    with connect(url, additional_headers={"X-Twilio-Signature": signature}) as ws:
        ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        sid = {"streamSid": "MZ" + "0" * 32}
        media_format = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
        call_sid = "CA" + "0" * 32
        # (what serve's TwiML would have given this call: twilio_call_token.py)
        parameters = {
            "pipeline": "brief",
            CALL_TOKEN_PARAMETER: TOKENS.issue(call_sid, time.time()),
        }
        start: dict[str, Any] = {"callSid": call_sid, "tracks": ["inbound"], **sid}
        start |= {"mediaFormat": media_format, "customParameters": parameters}
        ws.send(json.dumps({"event": "start", "start": start, **sid}))
        t0 = time.monotonic()
        for n, at in enumerate(range(0, len(data), PHONE_FRAME)):
            time.sleep(max(0.0, t0 + n * 0.02 - time.monotonic()))
            payload = base64.b64encode(data[at : at + PHONE_FRAME]).decode()
            ws.send(json.dumps({"event": "media", "media": {"payload": payload}, **sid}))
            if n == 50:
                got.reached.set()
            with contextlib.suppress(TimeoutError):
                while True:
                    ws.recv(timeout=0)  # (the answer's media and marks: unheard)
        ws.send(json.dumps({"event": "stop", "stop": {}, **sid}))
        with contextlib.suppress(ConnectionClosed):
            while True:
                ws.recv(timeout=GUARD_S)
        got.close_code = ws.close_code


def _read(ws: Any, got: Streamed, timeout: float) -> None:
    """The events waiting (``timeout`` 0), or the next one."""
    while True:
        try:
            data = ws.recv(timeout=timeout)
        except TimeoutError:
            return
        if isinstance(data, str) and (event := json.loads(data))["type"] == "error":
            got.errors.append(event)
        if timeout:
            return


Client = Callable[[str, Streamed], None]


async def run_client(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    client: Client,
    got: Streamed,
    stall_s: float = 0.0,
) -> tuple[Samples, list[tuple[str, dict[str, Any]]]]:
    """``client(server.ws_url, got)`` in a thread; with ``stall_s``: the server's
    loop blocked that long once ``got.reached``. The audio the server took (its
    debug recording), once checked that the listener's queue lost none of it,
    and the server's log."""
    inlets: list[FrameInlet] = []
    made = FrameInlet.__init__

    def kept(inlet: FrameInlet, backlog: int) -> None:
        made(inlet, backlog)
        inlets.append(inlet)

    monkeypatch.setattr(FrameInlet, "__init__", kept)
    folder, lines = tmp_path / "heard", []
    options: dict[str, Any] = {
        "log": lambda event, **fields: lines.append((event, fields)),
        "debug_audio_dir": folder,
        "twilio_auth_token": TWILIO_TOKEN,
    }
    async with Server(listening_pipelines(tmp_path), port=0, **options) as server:
        thread = threading.Thread(target=client, args=(server.ws_url, got), daemon=True)
        thread.start()
        with anyio.fail_after(GUARD_S):
            if stall_s:
                while not got.reached.is_set():  # (a client that died fails, not hangs)
                    assert thread.is_alive(), "the client stopped before the stall"
                    await anyio.sleep(0.005)
                time.sleep(stall_s)  # the server's loop frozen (the client sends on)
            while thread.is_alive():
                await anyio.sleep(0.05)
            while server.state is not None and server.state.sessions:
                await anyio.sleep(0.05)
    assert [inlet.dropped for inlet in inlets] == [0]
    (recording,) = folder.iterdir()
    heard, _ = sf.read(recording, dtype="int16")
    return np.asarray(heard, dtype=np.int16), lines


def noise(seconds: float, rate: int = RATE) -> Samples:
    rng = np.random.default_rng(3)
    return (rng.standard_normal(round(seconds * rate)) * 30).astype(np.int16)


async def test_a_server_that_freezes_blames_no_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's loop blocked past the burst while the client streams in real
    time (10 ms frames: the most that may wait at once): the frames that waited
    are all heard, no ``rate_limited``, no close."""
    got = Streamed(noise(2.0 + AUDIO_BURST_S + 2.0))
    client = functools.partial(stream, frame_ms=10, late=(1.0, 1.0))
    heard, _ = await run_client(tmp_path, monkeypatch, client, got, AUDIO_BURST_S + 1.0)
    assert got.errors == [] and got.close_code == 1000
    np.testing.assert_array_equal(heard, got.audio)


async def test_a_server_that_freezes_hangs_up_no_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on a phone call (Twilio's 20 ms μ-law media): no ``rate_limited``
    in the log, every frame heard, the call ends when the caller hangs up."""
    got = Streamed(noise(2.0 + AUDIO_BURST_S + 2.0, PHONE_RATE))
    heard, lines = await run_client(tmp_path, monkeypatch, phone_call, got, AUDIO_BURST_S + 1.0)
    errors = [fields for event, fields in lines if event == "error"]
    assert errors == [] and got.close_code == 1000
    np.testing.assert_array_equal(heard, pcm16_from_ulaw(ulaw_from_pcm16(got.audio)))


@pytest.mark.parametrize(
    ("burst_s", "frame_ms"), [(1.2, 20), (AUDIO_BURST_S, 10)], ids=["1.2s", "burst_10ms"]
)
async def test_a_burst_after_the_clients_network_stalled_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, burst_s: float, frame_ms: int
) -> None:
    """The client's frames held back ``burst_s`` (a handover, a retransmission),
    then delivered at once: all heard, nothing refused."""
    got = Streamed(noise(burst_s + 2.0))
    client = functools.partial(stream, frame_ms=frame_ms, late=(1.0, 1.0 + burst_s))
    heard, _ = await run_client(tmp_path, monkeypatch, client, got)
    assert got.errors == [] and got.close_code == 1000
    np.testing.assert_array_equal(heard, got.audio)

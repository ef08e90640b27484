"""The loop's heartbeat runs only while a session takes audio in: a stall of the
loop is then measured (and credited to the client's audio budget,
tests/test_serve_audio_pace.py), and an idle or typing server sets no timer."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from serve_helpers import read_turn, send, start
from serve_voice_helpers import listening_pipelines
from websockets.asyncio.client import connect

from voice_membrane.server import Server
from voice_membrane.server.loop_lag import Heartbeat, LoopLag

pytest.importorskip("pocketsphinx")
pytestmark = pytest.mark.anyio

VOICE_IN = {"encoding": "pcm16", "sample_rate": 16000, "frame_ms": 20}


async def _stall(seconds: float) -> None:
    time.sleep(seconds)  # the loop blocked
    await anyio.sleep(0.08)  # the overdue beat runs


async def test_a_held_heartbeat_measures_a_stall_and_a_released_one_does_not() -> None:
    lag = LoopLag()
    heartbeat = Heartbeat(lag, tick_s=0.01)
    loop_time = anyio.current_time
    await _stall(0.2)
    assert lag.stalled(loop_time()) == 0.0  # nobody held it: no beat, no lag
    with heartbeat.held():
        assert heartbeat.running
        await _stall(0.2)
        assert 0.15 <= lag.stalled(loop_time()) < 0.5
    assert not heartbeat.running
    before = lag.stalled(loop_time())
    await _stall(0.2)
    assert lag.stalled(loop_time()) == before  # released: stalls no longer counted


async def test_the_heartbeat_beats_until_its_last_holder_releases_it() -> None:
    heartbeat = Heartbeat(LoopLag(), tick_s=0.01)
    heartbeat.hold()
    heartbeat.hold()
    heartbeat.release()
    assert heartbeat.running
    heartbeat.release()
    assert not heartbeat.running
    heartbeat.release()  # one too many: nothing to stop, never negative
    heartbeat.hold()
    assert heartbeat.running
    heartbeat.stop()  # the server closing: whoever holds it
    assert not heartbeat.running


async def test_only_a_listening_session_holds_the_servers_heartbeat(tmp_path: Path) -> None:
    options = {"log": lambda *args, **fields: None}
    async with Server(listening_pipelines(tmp_path), port=0, **options) as server:
        assert server.state is not None
        heartbeat = server.state.heartbeat
        assert not heartbeat.running  # an idle server sets no timer
        async with connect(server.ws_url) as typing:
            await start(typing, pipeline="deaf")
            await send(typing, type="user.message", text="Hello")
            await read_turn(typing)
            assert not heartbeat.running  # nor does a typing session
            async with connect(server.ws_url) as listening:
                await start(listening, pipeline="voice", input_audio=VOICE_IN)
                assert heartbeat.running
            with anyio.fail_after(10):
                while heartbeat.running:  # its end releases it
                    await anyio.sleep(0.02)

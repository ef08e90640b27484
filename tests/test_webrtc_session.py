"""A session over WebRTC with the Python aiortc client: a spoken question answered
on the Opus track, barge-in by voice, typed turns and interrupt over the data
channel, the token, and everything given back when the peer goes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from serve_helpers import LONG_REPLY
from serve_voice_helpers import clip, silence
from webrtc_helpers import kinds, loopback_ice, question, rms, server, udp_sockets

from voice_membrane.testing.webrtc_client import Refused, WebRtcClient

pytest.importorskip("aiortc")
pytest.importorskip("pocketsphinx")
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("loopback_ice")]
__all__ = ["loopback_ice"]

Logs = list[tuple[str, dict[str, Any]]]


async def test_a_spoken_question_is_answered_and_speech_over_it_interrupts(
    tmp_path: Path,
) -> None:
    logs: Logs = []
    async with server(tmp_path, logs) as srv, WebRtcClient(srv.url) as client:
        started = await client.start(pipeline="voice", input_audio={})
        assert (
            started["type"] == "session.started" and started["input_audio"]["sample_rate"] == 48000
        )
        samples, rate = question()
        client.speak(np.concatenate([samples, np.zeros(rate // 2, dtype=np.int16)]), rate)
        final = await client.wait_for(lambda e: e["type"] == "transcript.final")
        assert "weather" in final["text"]
        turn = await client.wait_for(lambda e: e["type"] == "turn.started")
        assert turn == {"type": "turn.started", "turn": 1, "text": final["text"], "source": "voice"}
        await client.wait_for(lambda e: e["type"] == "transcript.delta")
        answered_from = len(client.received.frames)
        while len(client.received.frames) < answered_from + 100:  # 2 s of the answer
            await anyio.sleep(0.1)
        assert rms(client.received.audio()[answered_from * 960 :]) > 300  # espeak, not silence

        # "stop" over the answer: paused, then interrupted, what was heard kept.
        client.speak(np.concatenate([clip("stop"), silence(1.5)]), 16000)
        end = await client.wait_for(lambda e: e["type"] == "turn.end" and e["turn"] == 1)
        actions = [e["action"] for e in client.events if e["type"] == "barge_in"]
        assert actions[0] == "pause" and actions[-1] == "interrupt"
        assert end["interrupted"] and end["heard"] and LONG_REPLY.startswith(end["heard"].strip())
        assert len(end["heard"]) < len(LONG_REPLY)
    with anyio.fail_after(10):
        while "session_end" not in kinds(logs):
            await anyio.sleep(0.05)
    assert ("turn_end", True) in [(k, f.get("interrupted")) for k, f in logs]


async def test_typed_turns_and_interrupt_go_over_the_data_channel(tmp_path: Path) -> None:
    logs: Logs = []
    async with server(tmp_path, logs) as srv, WebRtcClient(srv.url, json_offer=True) as client:
        await client.start(pipeline="voice")  # (no input_audio: typed only)
        client.send(type="user.message", text="Tell me about the weather.")
        await client.wait_for(lambda e: e["type"] == "transcript.delta")
        await anyio.sleep(1.5)
        client.send(type="interrupt")
        end = await client.wait_for(lambda e: e["type"] == "turn.end")
        assert end["interrupted"] and end["heard"] and LONG_REPLY.startswith(end["heard"].strip())
        assert rms(client.received.audio()) > 100
        assert ("interrupt", 1) in [(k, f.get("turn")) for k, f in logs]

        client.send(type="bogus")
        error = await client.wait_for(lambda e: e["type"] == "error")
        assert error["code"] == "bad_message"
        client.channel.send(b"\x00\x01")  # audio goes on the track, not the channel
        await client.wait_for(lambda e: e["type"] == "error" and "track" in e["message"])


async def test_closing_mid_turn_ends_the_session_and_frees_its_sockets(tmp_path: Path) -> None:
    logs: Logs = []
    async with server(tmp_path, logs) as srv:
        before = udp_sockets()
        async with WebRtcClient(srv.url) as client:
            await client.start(pipeline="voice")
            client.send(type="user.message", text="Tell me about the weather.")
            await client.wait_for(lambda e: e["type"] == "transcript.delta")
            await anyio.sleep(0.5)
            assert udp_sockets() > before
        # The client closed its peer mid-turn: the turn ends as an interruption.
        with anyio.fail_after(15):
            while "session_end" not in kinds(logs):
                await anyio.sleep(0.05)
        ends = [f for k, f in logs if k == "turn_end"]
        assert len(ends) == 1 and ends[0]["interrupted"]
        with anyio.fail_after(10):
            while udp_sockets() > before:
                await anyio.sleep(0.1)
        assert srv.state is not None and srv.state.sessions == 0
        async with WebRtcClient(srv.url) as again:  # the server lives on
            assert (await again.start(pipeline="brief"))["type"] == "session.started"


async def test_a_server_with_a_token_answers_only_offers_that_bring_it(tmp_path: Path) -> None:
    logs: Logs = []
    async with server(tmp_path, logs, token="s3cret-token-1234") as srv:
        for token in (None, "wrong"):
            with pytest.raises(Refused) as refused:
                async with WebRtcClient(srv.url, token=token):
                    pass
            assert refused.value.status == 401
        async with WebRtcClient(srv.url, token="s3cret-token-1234") as client:
            assert (await client.start(pipeline="brief"))["type"] == "session.started"
    assert not any("s3cret" in repr(fields) for _, fields in logs)


async def test_drain_refuses_new_offers_and_closes_a_session_once_its_turn_ends(
    tmp_path: Path,
) -> None:
    logs: Logs = []
    async with server(tmp_path, logs) as srv, WebRtcClient(srv.url) as client:
        await client.start(pipeline="brief")
        client.send(type="user.message", text="Hi!")
        await client.wait_for(lambda e: e["type"] == "turn.started")
        async with anyio.create_task_group() as tg:
            tg.start_soon(srv.drain, 20.0)
            with anyio.fail_after(5):
                while srv.state is None or not srv.state.draining.is_set():
                    await anyio.sleep(0.02)
            with pytest.raises(Refused) as refused:
                async with WebRtcClient(srv.url):
                    pass
            assert refused.value.status == 503
            end = await client.wait_for(lambda e: e["type"] == "turn.end")
            assert not end["interrupted"]  # the running turn finished
            closed = await client.wait_for(lambda e: e["type"] == "session.closed")
            assert closed["code"] == 1001
    assert "drain_end" in kinds(logs)

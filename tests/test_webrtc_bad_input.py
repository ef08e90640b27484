"""Bad input to the WebRTC route: each a one-line answer or log line, nothing
built for it left behind (peer, UDP socket, task), and the server goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from aiortc import RTCPeerConnection
from aiortc.mediastreams import AudioStreamTrack
from webrtc_helpers import kinds, loopback_ice, server, udp_sockets

from voice_membrane.testing.webrtc_client import WebRtcClient

pytest.importorskip("aiortc")
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("loopback_ice")]
__all__ = ["loopback_ice"]

Logs = list[tuple[str, dict[str, Any]]]
SDP = {"Content-Type": "application/sdp"}


async def _offer(*, audio: bool, channel: bool) -> tuple[RTCPeerConnection, str]:
    pc = RTCPeerConnection()
    if audio:
        pc.addTrack(AudioStreamTrack())
    if channel:
        pc.createDataChannel("session")
    await pc.setLocalDescription(await pc.createOffer())
    return pc, pc.localDescription.sdp


async def _post(url: str, body: bytes | str, headers: dict[str, str] = SDP) -> httpx.Response:
    async with httpx.AsyncClient(timeout=20) as http:
        return await http.post(url + "/v1/webrtc/offer", content=body, headers=headers)


async def test_bad_offers_get_one_line_each_and_leave_nothing(tmp_path: Path) -> None:
    logs: Logs = []
    async with server(tmp_path, logs) as srv:
        before = udp_sockets()
        reply = await _post(srv.url, "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\nm=audio nonsense\r\n")
        assert reply.status_code == 400 and reply.text.startswith("malformed SDP offer")
        assert reply.text.count("\n") == 1
        for audio, channel, why in ((False, True, "no audio"), (True, False, "no data channel")):
            pc, sdp = await _offer(audio=audio, channel=channel)
            reply = await _post(srv.url, sdp)
            await pc.close()
            assert reply.status_code == 400 and why in reply.text, reply.text
        reply = await _post(srv.url, "v=0", {"Content-Type": "text/plain"})
        assert reply.status_code == 400 and "application/sdp" in reply.text
        reply = await _post(srv.url, '{"sdp": 1}', {"Content-Type": "application/json"})
        assert reply.status_code == 400
        reply = await _post(srv.url, b"v=0" + b"a" * 70_000)
        assert reply.status_code == 413
        reply = await _post(srv.url, "v=0", {**SDP, "Host": "evil.example"})
        assert reply.status_code == 421
        reply = await _post(srv.url, "v=0", {**SDP, "Origin": "https://evil.example"})
        assert reply.status_code == 403 and reply.text == "origin not allowed\n"
        # No token: a proxy's marks say the client is not on this machine.
        reply = await _post(srv.url, "v=0", {**SDP, "X-Forwarded-For": "203.0.113.9"})
        assert reply.status_code == 403 and "from this machine only" in reply.text
        reply = await _post(srv.url, "v=0", {**SDP, "Origin": srv.url})  # its own page's
        assert reply.status_code == 400  # (past the checks: the SDP is what is wrong)
        async with httpx.AsyncClient() as http:  # the rest of the port is as it was
            assert (await http.get(srv.url + "/healthz")).text == "ok\n"
            assert (await http.post(srv.url + "/elsewhere", content=b"x")).status_code == 404
        refused = [f for k, f in logs if k == "webrtc_refused"]
        assert len(refused) == 6 and all("\n" not in f["reason"] for f in refused)
        metrics = srv.state.metrics.render().decode()  # type: ignore[union-attr]
        assert 'voice_membrane_webrtc_offers_total{outcome="refused"} 6.0' in metrics
        assert udp_sockets() == before
        async with WebRtcClient(srv.url) as client:
            assert (await client.start(pipeline="brief"))["type"] == "session.started"


async def test_an_offer_the_server_fails_on_is_a_500_in_one_line_and_the_server_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs: Logs = []
    async with server(tmp_path, logs) as srv:
        before = udp_sockets()
        fault = RuntimeError("<asyncio.locks.Lock> is bound to a different event loop")
        with monkeypatch.context() as patched:  # (as aioice's mDNS lock once did)
            patched.setattr(RTCPeerConnection, "setRemoteDescription", _raise(fault))
            pc, sdp = await _offer(audio=True, channel=True)
            reply = await _post(srv.url, sdp)
            await pc.close()
        assert reply.status_code == 500, reply.text  # not the client's "malformed SDP"
        assert reply.text == "the server could not answer the offer: connect again\n"
        (failed,) = [f for k, f in logs if k == "webrtc_failed"]
        assert failed["reason"] == "internal" and "different event loop" in failed["error"]
        assert udp_sockets() == before and srv.webrtc is not None and srv.webrtc.pending == 0
        async with WebRtcClient(srv.url) as client:
            assert (await client.start(pipeline="brief"))["type"] == "session.started"


def _raise(exc: Exception) -> Any:
    async def fail(*_: Any) -> None:
        raise exc

    return fail


def test_an_mdns_lock_an_earlier_loop_bound_is_not_carried_into_the_next_server(
    tmp_path: Path,
) -> None:
    # aioice keeps its mDNS state per thread; two lookups of a browser's .local
    # candidates that meet bind its lock to their loop (as a server run before did).
    import aioice.ice

    state = aioice.ice._mdns

    async def contend() -> None:
        async def hold() -> None:
            async with state.lock:
                await asyncio.sleep(0.01)

        await asyncio.gather(hold(), hold())

    def first_loop() -> None:
        state.lock, state.protocol, state.subscribers = asyncio.Lock(), None, set()
        asyncio.run(contend())

    first_loop()
    with pytest.raises(RuntimeError, match="different event loop"):
        asyncio.run(contend())  # what every such offer met on the next loop

    async def serve_then_contend() -> None:
        async with server(tmp_path, []):
            with anyio.fail_after(10):
                while hasattr(state, "lock"):  # forgotten as the server's WebRTC host starts
                    await asyncio.sleep(0.01)
            state.lock, state.protocol, state.subscribers = asyncio.Lock(), None, set()
            await contend()  # (as a browser's lookups bind it to this server's loop)
        assert not hasattr(state, "lock")  # and forgotten as the server ends

    first_loop()
    asyncio.run(serve_then_contend())


async def test_a_post_in_pieces_is_read_whole(tmp_path: Path) -> None:
    async with server(tmp_path, []) as srv:
        stream = await anyio.connect_tcp("127.0.0.1", srv.port)
        body = b"v=0\r\n"
        head = (
            f"POST /v1/webrtc/offer HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
            f"Content-Type: application/sdp\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        for piece in (head[:2], head[2:9], head[9:], body):
            await stream.send(piece)
            await anyio.sleep(0.05)
        answer = b""
        with anyio.fail_after(10):
            try:
                while True:
                    answer += await stream.receive()
            except anyio.EndOfStream:
                pass
        assert answer.startswith(b"HTTP/1.1 400 ") and answer.endswith(
            b"no audio (m=audio): the session speaks\n"
        )


async def test_ice_that_never_completes_is_timed_out_in_one_line(tmp_path: Path) -> None:
    logs: Logs = []
    tasks_before = len(asyncio.all_tasks())
    async with server(tmp_path, logs, start_timeout_s=1.0) as srv:
        before = udp_sockets()
        pc, sdp = await _offer(audio=True, channel=True)
        reply = await _post(srv.url, sdp)
        assert reply.status_code == 201 and reply.headers["content-type"] == "application/sdp"
        await pc.close()  # the answer never used: no ICE checks ever come
        with anyio.fail_after(10):
            while "webrtc_failed" not in kinds(logs):
                await anyio.sleep(0.05)
        failed = [f for k, f in logs if k == "webrtc_failed"]
        assert len(failed) == 1 and failed[0]["reason"] == "ice_timeout"
        with anyio.fail_after(10):
            while udp_sockets() > before:
                await anyio.sleep(0.1)
        assert srv.webrtc is not None and srv.webrtc.pending == 0
        metrics = srv.state.metrics.render().decode()  # type: ignore[union-attr]
        assert 'voice_membrane_webrtc_offers_total{outcome="ice_timeout"} 1.0' in metrics
        assert 'voice_membrane_webrtc_offers_total{outcome="answered"} 1.0' in metrics
    await anyio.sleep(0.2)
    assert len(asyncio.all_tasks()) <= tasks_before  # nothing of aiortc's left running


async def test_a_data_channel_closed_mid_turn_ends_the_session(tmp_path: Path) -> None:
    logs: Logs = []
    async with server(tmp_path, logs) as srv:
        before = udp_sockets()
        async with WebRtcClient(srv.url) as client:
            await client.start(pipeline="voice")
            client.send(type="user.message", text="Tell me about the weather.")
            await client.wait_for(lambda e: e["type"] == "transcript.delta")
            client.channel.close()  # the peer stays up; the session is the channel's
            with anyio.fail_after(15):
                while "session_end" not in kinds(logs):
                    await anyio.sleep(0.05)
            # The server closed its peer (the client's still runs): DTLS says so.
            with anyio.fail_after(10):
                while client.pc.connectionState not in ("closed", "failed"):
                    await anyio.sleep(0.05)
        ends = [f for k, f in logs if k == "turn_end"]
        assert len(ends) == 1 and ends[0]["interrupted"]
        with anyio.fail_after(10):
            while udp_sockets() > before:
                await anyio.sleep(0.1)


async def test_a_closing_server_closes_its_webrtc_sessions(tmp_path: Path) -> None:
    logs: Logs = []
    async with server(tmp_path, logs) as srv, WebRtcClient(srv.url) as client:
        await client.start(pipeline="voice")
        client.send(type="user.message", text="Tell me about the weather.")
        await client.wait_for(lambda e: e["type"] == "transcript.delta")
        with anyio.fail_after(20):
            await srv.close()
        await client.wait_for(lambda e: e["type"] == "session.closed")
        assert client.closed is not None and client.closed["code"] == 1001
    assert "session_end" in kinds(logs)


async def test_a_flood_on_the_channel_is_closed_and_an_idle_session_times_out(
    tmp_path: Path,
) -> None:
    logs: Logs = []
    async with server(tmp_path, logs, idle_timeout_s=1.0) as srv:
        async with WebRtcClient(srv.url) as flooder:
            await flooder.start(pipeline="brief")
            for _ in range(200):
                flooder.send(type="interrupt")
            closed = await flooder.wait_for(lambda e: e["type"] == "session.closed")
            assert closed["code"] == 1008 and closed["reason"] == "rate_limited"
        async with WebRtcClient(srv.url) as idle:
            await idle.start(pipeline="brief")
            closed = await idle.wait_for(lambda e: e["type"] == "session.closed")
            assert closed["code"] == 4408
        with anyio.fail_after(10):
            while srv.state is None or srv.state.sessions:
                await anyio.sleep(0.05)

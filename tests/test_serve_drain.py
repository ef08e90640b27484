"""serve: draining on SIGTERM (a subprocess, as a load balancer sees it), the drain
timeout, and the HTTP endpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.serve_helpers import (
    GUARD_S,
    listening_pipeline,
    read_turn,
    running_server,
    send,
    session,
    start,
    write_pipeline,
)
from voice_membrane.server import Server
from voice_membrane.testing.fake_twilio import FakeTwilioCall, twilio_call

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parent.parent
MEDIUM = "This answer takes a few seconds to say, so the server drains while it speaks."
MEDIUM_SPOKEN = MEDIUM
QUESTION = REPO / "audio_fixtures" / "speech" / "phone" / "weather_paris.wav"


def http_get(url: str) -> tuple[int, str, bytes]:
    """(status, content type, body); an error status is an answer too."""
    try:
        with urllib.request.urlopen(url, timeout=GUARD_S) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


async def get(url: str) -> tuple[int, str, bytes]:
    return await anyio.to_thread.run_sync(http_get, url)


async def test_sigterm_drains_a_turn_in_progress(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path, "medium", MEDIUM)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("VOICE_MEMBRANE_TOKEN", None)
    command = [sys.executable, "-m", "voice_membrane.cli", "serve", "--pipeline", str(pipeline)]
    process = subprocess.Popen(
        [*command, "--port", "0", "--drain-timeout", "30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = await anyio.to_thread.run_sync(process.stdout.readline)
        assert line.startswith("listening on http://127.0.0.1:"), line
        url = line.split()[-1]
        ws_url = "ws" + url.removeprefix("http") + "/v1/session"
        assert (await get(url + "/readyz"))[0] == 200
        async with connect(ws_url) as ws:
            await start(ws)
            await send(ws, type="user.message", text="Talk for a while")
            with anyio.fail_after(GUARD_S):
                while not isinstance(await ws.recv(), bytes):
                    pass  # speaking now
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(GUARD_S):
                while (await get(url + "/readyz"))[0] != 503:
                    await anyio.sleep(0.02)
            assert (await get(url + "/healthz"))[0] == 200  # alive, just not taking sessions
            async with connect(ws_url) as late:
                refused = json.loads(await late.recv())
                with pytest.raises(ConnectionClosed):
                    await late.recv()
            assert refused["code"] == "draining" and late.close_code == 1013
            log = await read_turn(ws)  # the turn in progress finishes whole
            assert log.end["interrupted"] is False and log.end["heard"] == MEDIUM_SPOKEN
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 1001
        with anyio.fail_after(GUARD_S):
            code = await anyio.to_thread.run_sync(process.wait)
        assert code == 0
        assert process.stderr is not None
        log_lines = [json.loads(line) for line in process.stderr.read().splitlines()]
        names = [record["event"] for record in log_lines]
        for name in ("listening", "session_start", "turn_start", "drain_start", "turn_end"):
            assert name in names, names
        assert names[-1] == "drain_end"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_the_drain_timeout_interrupts_the_turn_and_closes_1001(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, session(server, pipeline="long") as ws:
        await send(ws, type="user.message", text="Weather?")
        with anyio.fail_after(GUARD_S):
            while not isinstance(await ws.recv(), bytes):
                pass
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.drain, 0.3)
            log = await read_turn(ws)
            with pytest.raises(ConnectionClosed):
                await ws.recv()
        assert log.end["interrupted"] is True
        assert ws.close_code == 1001


async def _played_out(call: FakeTwilioCall) -> None:
    """Until the answer has played and no more came for a second."""
    while call.close_code is None:
        last = call.media[-1]
        quiet_from = max(last.starts + len(last.samples) / 8000, last.arrived) + 1.0
        if time.perf_counter() >= quiet_from:
            return
        await anyio.sleep(quiet_from - time.perf_counter())


async def test_sigterm_lets_a_phone_call_go_on_until_it_ends(tmp_path: Path) -> None:
    # A Twilio stream cannot resume on another server: a rolling restart that
    # closed it would hang up on the caller.
    pytest.importorskip("pocketsphinx")
    pipeline = listening_pipeline(tmp_path, "phone", "It will be sunny in Paris tomorrow.")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name in ("VOICE_MEMBRANE_TOKEN", "TWILIO_AUTH_TOKEN"):
        env.pop(name, None)
    command = [sys.executable, "-m", "voice_membrane.cli", "serve", "--pipeline", str(pipeline)]
    process = subprocess.Popen(
        [*command, "--port", "0", "--drain-timeout", "300"],  # far past GUARD_S
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = await anyio.to_thread.run_sync(process.stdout.readline)
        url = line.split()[-1]
        call_url = "ws" + url.removeprefix("http") + "/v1/twilio"
        with anyio.fail_after(GUARD_S * 4):
            async with twilio_call(call_url) as call:
                first = await call.say(QUESTION, silence_after_s=0.3)
                await call.wait_for(lambda: call.first_media_after(first.ended) is not None, 60)
                process.send_signal(signal.SIGTERM)  # mid-answer
                while (await get(url + "/readyz"))[0] != 503:
                    await anyio.sleep(0.02)
                await _played_out(call)
                # The call goes on through the drain: another question is answered.
                second = await call.say(QUESTION, silence_after_s=0.3)
                await call.wait_for(lambda: call.first_media_after(second.ended) is not None, 60)
                await _played_out(call)
                assert call.close_code is None
            # The caller hung up: the server exits now, not at its drain timeout.
            code = await anyio.to_thread.run_sync(process.wait)
        assert code == 0 and call.close_code == 1000
        assert process.stderr is not None
        log_lines = [json.loads(line) for line in process.stderr.read().splitlines()]
        names = [record["event"] for record in log_lines]
        assert names.count("turn_end") == 2, names
        assert names.index("drain_start") < names.index("session_end")
        assert names[-1] == "drain_end"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_a_call_live_at_the_drain_deadline_is_closed_1001(tmp_path: Path) -> None:
    pytest.importorskip("pocketsphinx")
    pipeline = listening_pipeline(tmp_path, "medium", MEDIUM)
    async with Server([pipeline], port=0, log=lambda *a, **f: None) as server:
        call_url = server.ws_url.replace("/v1/session", "/v1/twilio")
        with anyio.fail_after(GUARD_S):
            async with twilio_call(call_url) as call:
                while not server.state or not server.state.sessions:
                    await anyio.sleep(0.02)
                await server.drain(0.5)
                await call.wait_for(lambda: False, GUARD_S)
    assert call.close_code == 1001


async def test_http_endpoints(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server:
        status, kind, body = await get(server.url + "/healthz")
        assert status == 200
        assert (await get(server.url + "/readyz"))[0] == 200
        status, kind, body = await get(server.url + "/")
        assert status == 200 and kind == "text/html; charset=utf-8" and b"<html" in body
        for path in ("/static/../server.py", "/static/%2e%2e/server.py", "/static/.hidden", "/x"):
            assert (await get(server.url + path))[0] == 404, path
        assert (await get(server.url + "/v1/session"))[0] == 426  # not an upgrade
        async with session(server) as ws:
            await send(ws, type="user.message", text="Hi!")
            await read_turn(ws)
            await ws.send("{bad")
            await ws.recv()
            status, kind, body = await get(server.url + "/metrics")
        assert status == 200 and kind.startswith("text/plain; version=0.0.4")
        text = body.decode()
        assert "voice_membrane_sessions 1.0" in text
        assert "voice_membrane_turns_total 1.0" in text
        assert "voice_membrane_first_audio_seconds_count 1.0" in text
        assert 'voice_membrane_errors_total{kind="bad_message"} 1.0' in text
        assert "voice_membrane_dropped_clients_total 0.0" in text


async def test_static_files_have_their_content_types(tmp_path: Path) -> None:
    static = tmp_path / "static"
    static.mkdir()
    (static / "index.html").write_text("<html>page</html>")
    (static / "app.js").write_text("console.log(1)")
    (static / "style.css").write_text("body {}")
    (tmp_path / "secret.html").write_text("not to be served")
    async with running_server(tmp_path, static_dir=static) as server:
        for path in ("/static/../secret.html", "/static/..%2fsecret.html", "/static/"):
            assert (await get(server.url + path))[0] == 404, path
        assert (await get(server.url + "/static/app.js"))[1] == "text/javascript; charset=utf-8"
        assert (await get(server.url + "/static/style.css"))[1] == "text/css; charset=utf-8"
        assert (await get(server.url + "/"))[2] == b"<html>page</html>"

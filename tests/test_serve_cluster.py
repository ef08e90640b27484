"""A small cluster on one machine: two serve processes behind HAProxy (Debian's),
sharing a Redis session store. A rolling restart — SIGTERM to the process
serving both sessions, one mid-turn and one idle — loses no turn and no
history: the running turn finishes (drain), each session is closed with 1001,
its client reconnects through HAProxy to the other process and resumes, and the
next turns' requests carry every earlier turn."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.resume_helpers import (
    KEY_ENV,
    cloud_pipeline,
    resume,
    serve_process,
    stop_processes,
    texts,
    ws_url,
)
from tests.serve_helpers import GUARD_S, LONG_REPLY, next_event, read_turn, send, start
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.redis_server import RedisServer, free_port
from voice_membrane.testing.script import ScriptedReply

pytestmark = pytest.mark.anyio
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
RECONNECT_CODES = {1001, 1006, 1011, 1013}  # what a client takes as "come back"


def _haproxy_config(port: int, backends: list[int]) -> str:
    host = f"127.0.0.1:{port}"
    servers = "\n".join(
        f"  server s{i} 127.0.0.1:{p} check inter 100ms fall 1 rise 2"
        for i, p in enumerate(backends)
    )
    # "first": every session on the first ready server, so the test knows which
    # one to restart; /readyz (503 while draining) takes a server out.
    return f"""
global
  maxconn 200
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout tunnel 60s
frontend voice
  bind {host}
  default_backend serve
backend serve
  balance first
  option httpchk
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host {host}
  http-check expect status 200
{servers}
"""


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + GUARD_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


async def _closed_code(ws: ClientConnection, log: list[dict[str, Any]]) -> int | None:
    """Read until the server closes; events go to ``log``."""
    with anyio.fail_after(GUARD_S):
        try:
            while True:
                data = await ws.recv()
                if isinstance(data, str):
                    log.append(json.loads(data))
        except ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd else None


async def _resume_through(url: str, started: dict[str, Any]) -> tuple[ClientConnection, Any]:
    """Reconnect and resume as a client does: try again (with a pause) while the
    balancer still sends it to the draining process or to none."""
    with anyio.fail_after(GUARD_S):
        while True:
            try:
                ws = await connect(url)
            except (OSError, InvalidStatus):
                await anyio.sleep(0.2)
                continue
            try:
                await resume(ws, started)  # (a draining process may have closed already)
                event = await next_event(ws)
            except ConnectionClosed as exc:
                assert exc.rcvd is not None and exc.rcvd.code in RECONNECT_CODES, exc
                await anyio.sleep(0.2)
                continue
            if event["type"] == "error" and event["code"] == "draining":
                await ws.close()
                await anyio.sleep(0.2)
                continue
            assert event["type"] == "session.resumed", event
            started.update(resume_token=event["resume_token"])
            return ws, event


async def test_a_rolling_restart_behind_haproxy_loses_no_turn_and_no_history(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "k")
    proxy_port = free_port()
    replies = (
        ScriptedReply.of("Hello, Ada."),  # Ada, turn 1
        ScriptedReply.of("Hi, Bob."),  # Bob, turn 1
        ScriptedReply.of(LONG_REPLY),  # Ada, turn 2: running at the SIGTERM
        ScriptedReply.of("You live in Paris."),  # Ada, turn 3 on the other process
        ScriptedReply.of("You are Bob."),  # Bob, turn 2 on the other process
    )
    with FakeOpenAI(*replies) as llm:
        pipeline = cloud_pipeline(tmp_path, llm.base_url)
        flags = ("--session-store", redis_server.url, "--allow-host", f"127.0.0.1:{proxy_port}")
        a, b = serve_process(pipeline, *flags), serve_process(pipeline, *flags)
        proxy: subprocess.Popen[str] | None = None
        try:
            ports = [int((await ws_url(p)).split(":")[2].split("/")[0]) for p in (a, b)]
            config = tmp_path / "haproxy.cfg"
            config.write_text(_haproxy_config(proxy_port, ports), encoding="utf-8")
            proxy = subprocess.Popen(
                [HAPROXY, "-f", str(config), "-db"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            await anyio.to_thread.run_sync(_wait_listening, proxy_port)
            await anyio.sleep(0.5)  # the health checks mark the servers up
            url = f"ws://127.0.0.1:{proxy_port}/v1/session"

            ada_ws, bob_ws = await connect(url), await connect(url)
            ada, bob = await start(ada_ws), await start(bob_ws)
            await send(ada_ws, type="user.message", text="I live in Paris.")
            await read_turn(ada_ws)
            await send(bob_ws, type="user.message", text="I am Bob.")
            await read_turn(bob_ws)
            await send(ada_ws, type="user.message", text="Tell me the weather.")
            with anyio.fail_after(GUARD_S):
                while not isinstance(await ada_ws.recv(), bytes):
                    pass  # Ada hears the reply now
            a.send_signal(signal.SIGTERM)  # the rolling restart begins

            # Bob is idle: closed at once with 1001, comes back on the other process.
            assert await _closed_code(bob_ws, []) == 1001
            bob_ws, bob_back = await _resume_through(url, bob)
            assert bob_back["turns"] == 1 and bob_back["last_turn"]["fate"] == "complete"

            # Ada's turn finishes first (the drain), then her session is closed.
            ada_events: list[dict[str, Any]] = []
            assert await _closed_code(ada_ws, ada_events) == 1001
            (end,) = [e for e in ada_events if e["type"] == "turn.end"]
            assert end["turn"] == 2 and not end["interrupted"] and end["heard"]
            ada_ws, ada_back = await _resume_through(url, ada)
            assert ada_back["turns"] == 2
            assert ada_back["last_turn"]["fate"] == "complete"
            assert ada_back["last_turn"]["heard"] == end["heard"]

            await send(ada_ws, type="user.message", text="Where do I live?")
            assert (await read_turn(ada_ws)).end["turn"] == 3
            await send(bob_ws, type="user.message", text="Who am I?")
            assert (await read_turn(bob_ws)).end["turn"] == 2
            await ada_ws.close()
            await bob_ws.close()
            with anyio.fail_after(GUARD_S):
                assert await anyio.to_thread.run_sync(a.wait) == 0  # drained, exit 0
        finally:
            if proxy is not None:
                proxy.kill()
                proxy.wait()
            stop_processes(a, b)
    ada_third = texts(llm.requests[3].body)
    assert ada_third[:2] == [("user", "I live in Paris."), ("assistant", "Hello, Ada.")]
    assert ada_third[2] == ("user", "Tell me the weather.")
    assert ada_third[3] == ("assistant", end["heard"]) and ada_third[4][1] == "Where do I live?"
    assert texts(llm.requests[4].body) == [
        ("user", "I am Bob."),
        ("assistant", "Hi, Bob."),
        ("user", "Who am I?"),
    ]

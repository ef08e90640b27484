"""Hostile probes: a refused login followed by a stream of frames. websockets
stops reading a socket on which 16 messages wait unread, so the client's
answering close sat behind them; the close then outlived the wait for the
start and the refusal was logged as an idle timeout (4408). A refused login is
4401 ``unauthorized`` whatever the client sends after it, and is counted."""

from __future__ import annotations

import contextlib
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.serve_helpers import GUARD_S, running_server
from voice_membrane.server.log import JsonLog

pytestmark = pytest.mark.anyio

TOKEN = "a-token-of-24-characters"
WRONG = "not-the-token-of-24-char"
FRAMES = 25


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=GUARD_S) as answer:
        return str(answer.read().decode())


@pytest.mark.parametrize(
    ("offered", "reason"),
    [("message", "wrong_token"), ("header", "wrong_token"), ("none", "no_token")],
)
async def test_a_refused_login_is_4401_whatever_the_client_sends_after_it(
    tmp_path: Path, offered: str, reason: str
) -> None:
    lines: list[str] = []
    # (a short wait for the start: the refusal must not become its timeout)
    options: dict[str, Any] = {"token": TOKEN, "log": JsonLog(lines.append)}
    async with running_server(tmp_path, start_timeout_s=1.0, **options) as server:
        headers = [("Authorization", f"Bearer {WRONG}")] if offered == "header" else []
        start: dict[str, Any] = {"type": "session.start"}
        if offered == "message":
            start["token"] = WRONG
        with anyio.fail_after(GUARD_S):
            async with connect(server.ws_url, additional_headers=headers) as ws:
                # (a refusal on the header may close the socket while these go out)
                with contextlib.suppress(ConnectionClosed):
                    await ws.send(json.dumps(start))
                    for n in range(FRAMES):  # text and binary, unread by the server
                        frame = b"\x00\x01" * 160 if n % 2 else json.dumps({"type": "interrupt"})
                        await ws.send(frame)
                with pytest.raises(ConnectionClosed):
                    while True:
                        await ws.recv()
                assert ws.close_code == 4401 and ws.close_reason == "unauthorized"
            while not any('"refused"' in line for line in lines):
                await anyio.sleep(0.05)
            await anyio.sleep(1.5)  # past the wait for the start: no second line
        refused = [json.loads(line) for line in lines if '"refused"' in line]
        assert [(r["code"], r["reason"]) for r in refused] == [(4401, "unauthorized")], refused
        assert not any("idle_timeout" in line for line in lines)
        metrics = await anyio.to_thread.run_sync(scrape, f"{server.url}/metrics")
    counted = re.search(
        rf'^voice_membrane_refused_logins_total{{reason="{reason}"}} (\S+)$', metrics, re.M
    )
    assert counted is not None and float(counted[1]) == 1.0, metrics
    assert WRONG not in "".join(lines) and TOKEN not in "".join(lines)

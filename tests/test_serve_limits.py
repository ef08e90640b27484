"""serve: bad messages, limits, authentication, origins, timeouts."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.serve_helpers import (
    GUARD_S,
    SHORT_SPOKEN,
    next_event,
    read_turn,
    running_server,
    send,
    session,
    start,
    write_pipeline,
)
from voice_membrane.server import Server
from voice_membrane.tts.base import TtsError

pytestmark = pytest.mark.anyio


async def closed_with(ws: ClientConnection) -> tuple[int | None, list[dict[str, Any]]]:
    """Read until the server closes; its close code and the events before it."""
    events: list[dict[str, Any]] = []
    with anyio.fail_after(GUARD_S):
        try:
            while True:
                data = await ws.recv()
                if isinstance(data, str):
                    events.append(json.loads(data))
        except ConnectionClosed:
            pass
    return ws.close_code, events


async def still_works(ws: ClientConnection) -> None:
    await send(ws, type="user.message", text="Hi!")
    log = await read_turn(ws)
    assert log.end["heard"] == SHORT_SPOKEN


BAD_FRAMES: list[tuple[str | bytes, str]] = [
    ("{not json", "not JSON"),
    ("[1, 2]", "JSON object"),
    ('{"type": "user.shout"}', "unknown type"),
    ('{"text": "no type"}', "unknown type"),
    ('{"type": "user.message", "text": ""}', "text"),
    ('{"type": "user.message", "text": "hi", "extra": 1}', "extra"),
    ('{"type": "user.message", "text": "' + "x" * 4001 + '"}', "text"),
    ('{"type": "user.message", "text": "hi", "participant": "a\\nb"}', "participant"),
    ('{"type": "session.start"}', "started already"),
    (b"\x00\x01binary", "takes no audio"),  # (a session without input_audio)
]


async def test_each_bad_message_is_refused_and_the_session_goes_on(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, session(server) as ws:
        for frame, says in BAD_FRAMES:
            await ws.send(frame)
            error = await next_event(ws)
            assert error["type"] == "error" and error["code"] == "bad_message", frame
            assert says in error["message"], (frame, error)
        await still_works(ws)


async def test_busy_while_a_turn_runs(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, session(server, pipeline="long") as ws:
        await send(ws, type="user.message", text="Weather?")
        await send(ws, type="user.message", text="And tomorrow?")
        while (event := await next_event(ws))["type"] != "error":
            pass
        assert event["code"] == "busy" and event["turn"] == 1
        await send(ws, type="interrupt")
        log = await read_turn(ws)
        assert log.end["turn"] == 1 and log.end["interrupted"]


async def test_an_oversized_frame_closes_with_1009(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, session(server) as ws:
        await ws.send(json.dumps({"type": "user.message", "text": "x" * 70_000}))
        code, _ = await closed_with(ws)
    assert code == 1009


async def test_a_flood_is_refused_then_the_session_goes_on(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, session(server) as ws:
        for _ in range(30):
            await send(ws, type="interrupt")  # a no-op without a turn
        error = await next_event(ws)
        assert error["code"] == "rate_limited"
        await anyio.sleep(1.1)  # the bucket refills
        await still_works(ws)


async def test_a_client_that_keeps_flooding_is_closed_with_1008(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, session(server) as ws:
        for _ in range(100):
            await send(ws, type="interrupt")
        code, events = await closed_with(ws)
    assert code == 1008
    assert [e["code"] for e in events] == ["rate_limited"]  # told once, not per message


async def test_idle_timeout_closes_with_4408(tmp_path: Path) -> None:
    async with running_server(tmp_path, idle_timeout_s=0.5) as server, session(server) as ws:
        code, events = await closed_with(ws)
    assert code == 4408
    assert events[-1]["code"] == "idle_timeout"


async def test_a_turn_is_not_idle(tmp_path: Path) -> None:
    """The idle clock stops while a turn runs (its audio outlasts the timeout)."""
    async with (
        running_server(tmp_path, idle_timeout_s=0.8) as server,
        session(server, pipeline="long") as ws,
    ):
        await send(ws, type="user.message", text="Weather?")
        received = 0
        with anyio.fail_after(GUARD_S):
            while received < 60:  # 1.2 s of audio, past the idle timeout
                if isinstance(await ws.recv(), bytes):
                    received += 1
        await send(ws, type="interrupt")
        log = await read_turn(ws)
        assert log.end["interrupted"]


async def test_no_session_start_in_time(tmp_path: Path) -> None:
    async with (
        running_server(tmp_path, start_timeout_s=0.3) as server,
        connect(server.ws_url) as ws,
    ):
        code, events = await closed_with(ws)
    assert code == 4408 and events[-1]["code"] == "idle_timeout"


async def test_the_first_message_must_be_session_start(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, connect(server.ws_url) as ws:
        await send(ws, type="user.message", text="Hi!")
        error = await next_event(ws)
        assert error["code"] == "bad_message" and "session.start" in error["message"]
        await start(ws)
        await still_works(ws)


async def test_a_pipeline_the_server_does_not_allow(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, connect(server.ws_url) as ws:
        await send(ws, type="session.start", pipeline="anthropic")
        error = await next_event(ws)
        assert error["code"] == "pipeline_not_allowed"
        assert "short" in error["message"] and "long" in error["message"]
        started = await start(ws, pipeline="long")
        assert started["pipeline"] == "long"


# Authentication


async def test_token_in_the_header(tmp_path: Path) -> None:
    headers = {"Authorization": "Bearer s3cret-token"}
    async with (
        running_server(tmp_path, token="s3cret-token") as server,
        connect(server.ws_url, additional_headers=headers) as ws,
    ):
        await start(ws)
        await still_works(ws)


async def test_token_in_session_start(tmp_path: Path) -> None:
    async with (
        running_server(tmp_path, token="s3cret-token") as server,
        connect(server.ws_url) as ws,
    ):
        await start(ws, token="s3cret-token")
        await still_works(ws)


@pytest.mark.parametrize(
    ("headers", "first"),
    [
        ({}, {"type": "session.start"}),  # missing
        ({}, {"type": "session.start", "token": "wrong"}),
        ({}, {"type": "user.message", "text": "hi"}),  # no session.start at all
        ({}, "{not json"),
        ({"Authorization": "Bearer wrong"}, {"type": "session.start"}),
        ({"Authorization": "Bearer wrong"}, {"type": "session.start", "token": "s3cret-token"}),
        ({"Authorization": "Basic czNjcmV0LXRva2Vu"}, {"type": "session.start"}),
    ],
)
async def test_a_wrong_or_missing_token_closes_with_4401(
    tmp_path: Path, headers: dict[str, str], first: dict[str, Any] | str
) -> None:
    log: list[tuple[Any, ...]] = []
    async with (
        running_server(
            tmp_path, token="s3cret-token", log=lambda *a, **k: log.append((a, k))
        ) as server,
        connect(server.ws_url, additional_headers=headers) as ws,
    ):
        # (A wrong header token is refused before the first message.)
        with contextlib.suppress(ConnectionClosed):
            await ws.send(first if isinstance(first, str) else json.dumps(first))
        code, events = await closed_with(ws)
        assert server.state is not None and server.state.sessions == 0
    assert code == 4401
    assert events == []  # nothing else is said to an unauthenticated client
    assert "s3cret-token" not in repr(log) and "wrong" not in repr(log)


# Origins


async def test_a_wrong_origin_is_refused_with_403(tmp_path: Path) -> None:
    async with running_server(tmp_path, allow_origins=["https://app.example.com"]) as server:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(server.ws_url, origin="https://evil.example.com"):  # type: ignore[arg-type]
                pass
        assert refused.value.response.status_code == 403
        async with connect(server.ws_url, origin="https://app.example.com") as ws:  # type: ignore[arg-type]
            await start(ws)
        own = f"http://localhost:{server.port}"
        async with connect(server.ws_url, origin=own) as ws:  # type: ignore[arg-type]
            await start(ws)


def broken_voice(folder: Path) -> Path:
    """A pipeline whose Piper voice has no config file: its engine fails to start."""
    model = folder / "no-such-voice.onnx"
    model.write_bytes(b"not a model")
    return write_pipeline(folder, "broken", "Hi.", tts=f"piper:{model}")


async def test_a_voice_that_will_not_load_is_an_error_and_1011(tmp_path: Path) -> None:
    pipeline = broken_voice(tmp_path)
    async with (
        Server([pipeline], port=0, preload=False, log=lambda *a, **k: None) as server,
        connect(server.ws_url) as ws,
    ):
        await send(ws, type="session.start")
        code, events = await closed_with(ws)
    assert code == 1011
    assert [e["code"] for e in events] == ["tts_error"]
    assert "no-such-voice.onnx" in events[0]["message"]


def test_a_pipeline_that_will_not_load_stops_the_server_at_start(tmp_path: Path) -> None:
    pipeline = broken_voice(tmp_path)

    async def main() -> None:
        async with Server([pipeline], port=0, log=lambda *a, **k: None):
            pass

    with pytest.raises(TtsError, match=r"no-such-voice\.onnx"):
        anyio.run(main)


async def test_a_full_server_refuses_one_more_session_with_1013(tmp_path: Path) -> None:
    async with running_server(tmp_path, max_sessions=1) as server:
        async with session(server) as first:
            async with connect(server.ws_url) as extra:
                await send(extra, type="session.start")
                refused = await next_event(extra)
                with pytest.raises(ConnectionClosed):
                    await next_event(extra)
            assert refused["type"] == "error" and refused["code"] == "full"
            assert extra.close_code == 1013
            await send(first, type="user.message", text="still here?")
            assert (await read_turn(first)).end["error"] is None
        # The first session ended: a new one is taken (once the server has seen it
        # end, a few ms after the client's close returns).
        assert server.state is not None
        with anyio.fail_after(GUARD_S):
            while server.state.sessions:
                await anyio.sleep(0.01)
        async with session(server) as again:
            await send(again, type="user.message", text="hello")
            assert (await read_turn(again)).end["error"] is None

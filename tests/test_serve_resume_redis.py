"""Resume across processes with a real redis-server: a serve process killed with
SIGKILL mid-turn, the session resumed on a second process sharing the store,
the lost turn reported as cancelled and the next request carrying the earlier
turns; Redis unreachable at start (one line, exit non-zero); a bad config file
(one line naming it and the key); Redis stopped mid-session and started again
empty (the sessions go on, a resume is told to try again, and once Redis is
back every session, even one started during the outage, resumes on the other
process)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.resume_helpers import (
    KEY_ENV,
    cloud_pipeline,
    resume,
    resumed,
    serve_process,
    serving,
    stop_processes,
    texts,
    ws_url,
)
from tests.serve_helpers import GUARD_S, LONG_REPLY, next_event, read_turn, send, start
from voice_membrane.server.serve_config import STORE_VARIABLE, SessionSettings
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.redis_server import RedisServer, free_port
from voice_membrane.testing.script import ScriptedReply

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "k")


async def test_killed_mid_turn_the_session_resumes_on_another_process(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    replies = (
        ScriptedReply.of("Hello, Ada."),
        ScriptedReply.of(LONG_REPLY),
        ScriptedReply.of("You live in Paris."),
    )
    with FakeOpenAI(*replies) as llm:
        pipeline = cloud_pipeline(tmp_path, llm.base_url)
        store = ("--session-store", redis_server.url)
        a, b = serve_process(pipeline, *store), serve_process(pipeline, *store)
        try:
            url_a, url_b = await ws_url(a), await ws_url(b)
            async with connect(url_a) as ws:
                started = await start(ws)
                await send(ws, type="user.message", text="I live in Paris.")
                await read_turn(ws)
                await send(ws, type="user.message", text="Tell me the weather.")
                with anyio.fail_after(GUARD_S):
                    while not isinstance(await ws.recv(), bytes):
                        pass  # speaking now
                a.send_signal(signal.SIGKILL)
                with pytest.raises(ConnectionClosed), anyio.fail_after(GUARD_S):
                    while True:
                        await ws.recv()
            async with connect(url_b) as ws:
                back = await resumed(ws, started)
                assert back["turns"] == 1
                assert back["last_turn"] == {
                    "turn": 2,
                    "fate": "cancelled",
                    "text": "Tell me the weather.",
                    "heard": "",
                    "error": None,
                }
                await send(ws, type="user.message", text="Where do I live?")
                turn = await read_turn(ws)
                assert turn.end["turn"] == 3 and turn.end["heard"] == "You live in Paris."
        finally:
            stop_processes(a, b)
    assert texts(llm.requests[2].body) == [
        ("user", "I live in Paris."),
        ("assistant", "Hello, Ada."),
        ("user", "Where do I live?"),
    ]
    assert b.stderr is not None
    log = b.stderr.read()
    assert "session_resume" in log and "Paris" not in log  # no user text in the log


def _one_line_exit(process: subprocess.Popen[str]) -> str:
    _, err = process.communicate(timeout=GUARD_S)
    assert process.returncode not in (0, None), err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


async def test_redis_unreachable_at_start_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    # (in the environment: on the command line it would be warned of, a second line)
    monkeypatch.setenv(STORE_VARIABLE, f"redis://:sekrit-password@127.0.0.1:{port}/0")
    process = serve_process(cloud_pipeline(tmp_path, "http://127.0.0.1:9"))
    err = _one_line_exit(process)
    assert err.startswith(f"voice-membrane serve: session store redis://127.0.0.1:{port}/0: ")
    assert "sekrit" not in err


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[sessions]\ngrace = 30\n", "sessions.grace: Extra inputs are not permitted"),
        ("[sessions]\ngrace_s = 1\n", "sessions.grace_s: Input should be greater than or equal"),
        ('[sessions]\nstore = "mysql://x"\n', 'sessions.store: "memory" or a Redis URL'),
        ("[session]\n", "session: Extra inputs are not permitted"),
        ("[sessions\n", "not TOML"),
    ],
)
def test_a_bad_config_file_is_one_line_naming_it_and_the_key(
    tmp_path: Path, text: str, where: str
) -> None:
    from voice_membrane.cli.main import main

    config = tmp_path / "serve.toml"
    config.write_text(text, encoding="utf-8")
    pipeline = cloud_pipeline(tmp_path, "http://127.0.0.1:9")
    # (in process: the command exits while reading its options, before serving)
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--pipeline", str(pipeline), "--port", "0", "--config", str(config)])
    err = str(exited.value.code)
    assert err.startswith(f"voice-membrane serve: {config}: ") and "\n" not in err, err
    assert where in err, err


def _read_log(process: subprocess.Popen[str], into: list[dict[str, Any]]) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        with contextlib.suppress(ValueError):
            into.append(json.loads(line))


async def _logged(log: list[dict[str, Any]], event: str) -> None:
    with anyio.fail_after(GUARD_S):
        while not any(record.get("event") == event for record in list(log)):
            await anyio.sleep(0.05)


async def test_a_redis_outage_loses_no_session_and_a_resume_meanwhile_is_told_to_try_again(
    tmp_path: Path,
) -> None:
    replies = (ScriptedReply.of("One."), ScriptedReply.of("Two."), ScriptedReply.of("Three."))
    logs: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    with RedisServer() as redis, FakeOpenAI(*replies) as llm:  # its own: this test stops it
        pipeline = cloud_pipeline(tmp_path, llm.base_url)
        store = ("--session-store", redis.url)
        a, b = serve_process(pipeline, *store), serve_process(pipeline, *store)
        try:
            url_a, url_b = await ws_url(a), await ws_url(b)
            for process, log in zip((a, b), logs, strict=True):
                threading.Thread(target=_read_log, args=(process, log), daemon=True).start()
            async with connect(url_a) as ws:
                before = await start(ws)
                await send(ws, type="user.message", text="First.")
                await read_turn(ws)
                redis.stop()
                await send(ws, type="user.message", text="Second.")
                second = await read_turn(ws)
                assert second.end["heard"] == "Two." and not second.of("error")
                async with connect(url_a) as other:  # a session started during the outage
                    during = await start(other)
                    await send(other, type="user.message", text="Third.")
                    await read_turn(other)
                    other.transport.abort()
                ws.transport.abort()
            async with connect(url_b) as ws:  # during the outage: try again, not 4410
                await resume(ws, before)
                assert (await next_event(ws))["code"] == "store_unavailable"
                with pytest.raises(ConnectionClosed) as closed, anyio.fail_after(GUARD_S):
                    await ws.recv()
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
            redis.restart()  # on its port, empty: what was held is written again
            await _logged(logs[0], "session_store_back")
            await _logged(logs[1], "session_store_back")
            async with connect(url_b) as ws:
                assert (await resumed(ws, before))["turns"] == 2
            async with connect(url_b) as ws:
                assert (await resumed(ws, during))["turns"] == 1
        finally:
            stop_processes(a, b)
    for log in logs:
        events = [record.get("event") for record in log]
        assert events.count("session_store_lost") == 1, events
        assert events.count("session_store_back") == 1, events


def test_the_session_store_flag_overrides_the_config_file(tmp_path: Path) -> None:
    from voice_membrane.cli.main import _parse
    from voice_membrane.cli.serve_command import session_settings

    config = tmp_path / "serve.toml"
    config.write_text('[sessions]\nstore = "redis://10.0.0.7:6379/0"\ngrace_s = 30\n')
    args = _parse(["serve", "--config", str(config)])
    assert session_settings(args) == SessionSettings(store="redis://10.0.0.7:6379/0", grace_s=30)
    args = _parse(["serve", "--config", str(config), "--session-store", "memory"])
    assert session_settings(args) == SessionSettings(store="memory", grace_s=30)
    with pytest.raises(SystemExit, match='--session-store: "memory" or a Redis URL'):
        session_settings(_parse(["serve", "--session-store", "http://x"]))


async def test_a_replica_without_the_pipeline_refuses_the_resume_and_spends_nothing(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    from voice_membrane.server import Server
    from voice_membrane.server.protocol import CLOSE_RESUME_FAILED

    settings = SessionSettings(store=redis_server.url)
    quiet = lambda *args, **fields: None  # noqa: E731
    other = tmp_path / "other"
    other.mkdir()
    async with (
        serving(tmp_path, sessions=settings) as (_llm, here),
        Server(
            [cloud_pipeline(other, "http://127.0.0.1:9", name="elsewhere")],
            port=0,
            log=quiet,
            sessions=settings,
        ) as there,
    ):
        async with connect(here.ws_url) as ws:
            started = await start(ws)
            ws.transport.abort()
        async with connect(there.ws_url) as ws:  # it serves another pipeline only
            await resume(ws, started)
            with pytest.raises(ConnectionClosed) as closed, anyio.fail_after(GUARD_S):
                while True:
                    await ws.recv()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == CLOSE_RESUME_FAILED
        async with connect(here.ws_url) as ws:  # the token still opens it where it is served
            assert (await resumed(ws, started))["pipeline"] == "chat"

"""An attacker who can read the session store (any pod on Redis's network, a
dump of its memory) reads every stored conversation: what is stored must hold
no key, token or password the user said or the model answered. A user says a
key-shaped secret in a session on a real redis-server and on the memory store;
the raw record holds none of it (masked as the events mask it), and the session
still resumes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
import redis.asyncio as aioredis
from websockets.asyncio.client import connect

from tests.resume_helpers import KEY_ENV, resumed, serving, texts
from tests.serve_helpers import GUARD_S, LONG_REPLY, read_turn, send, start
from voice_membrane.server import Server
from voice_membrane.server.redis_store import RedisStore
from voice_membrane.server.serve_config import SessionSettings
from voice_membrane.server.session_store import (
    LastTurn,
    MemoryStore,
    SessionRecord,
    SessionStore,
    StoredTurn,
    token_hash,
)
from voice_membrane.server.state import new_session_id
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.redis_server import RedisServer
from voice_membrane.testing.script import ScriptedReply

pytestmark = pytest.mark.anyio

# Shaped as the vendors issue them, known to no process (masked by shape alone).
USER_KEY = "sk-proj-Q7vN2xLp9RtY4mKc8HwB3sDf6GhJ1zXa5VbNq0Ue"
MODEL_KEY = "AIzaSyD4k9Xq2LmN7pR1tV6wZ3yB8cF5hJ0gK2"
PASSWORD_URL = "redis://:hunter2-very-secret@db.internal:6379/0"
SECRETS = (USER_KEY, MODEL_KEY, "hunter2-very-secret")

Raw = Callable[[str], Awaitable[str]]  # a session's record as the store holds it


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "k")


def _assert_no_secret(raw: str) -> None:
    assert raw  # a record was written
    for secret in SECRETS:
        assert secret not in raw, raw
        assert secret[:16] not in raw, raw  # not a part of it either


def _raw_redis(url: str) -> Raw:
    async def read(session: str) -> str:
        client = aioredis.Redis.from_url(url, decode_responses=True)
        try:
            return str(await client.get(f"vm:{{{session}}}:record") or "")
        finally:
            await client.aclose()

    return read


def _raw_memory(store: MemoryStore) -> Raw:
    async def read(session: str) -> str:
        kept = store._kept.get(session)
        return "" if kept is None else kept.text

    return read


@pytest.fixture(params=["memory", "redis"])
async def store_and_raw(request: pytest.FixtureRequest) -> AsyncIterator[tuple[SessionStore, Raw]]:
    if request.param == "memory":
        memory = MemoryStore(grace_s=60)
        yield memory, _raw_memory(memory)
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    store = RedisStore(server.url, grace_s=60)
    await store.open()
    yield store, _raw_redis(server.url)
    await store.aclose()


async def test_every_text_of_a_record_is_stored_masked(
    store_and_raw: tuple[SessionStore, Raw],
) -> None:
    store, raw = store_and_raw
    session = new_session_id()
    said = f"my key is {USER_KEY}, the cache {PASSWORD_URL}"
    answer = f"noted: {MODEL_KEY}"
    record = SessionRecord(
        session=session,
        pipeline="chat",
        turn=2,
        history=(StoredTurn(user=said, heard=answer, participant=f"Ada {USER_KEY}", error=said),),
        running=2,
        running_text=said,
        last_turn=LastTurn(turn=1, fate="error", text=said, heard=answer, error=answer),
    )
    assert await store.save(record, token_hash(session, "t"), "o")
    stored = await raw(session)
    _assert_no_secret(stored)
    assert stored.count("***") >= 10  # each field masked, not dropped
    got = await store.claim(session, token_hash(session, "t"), token_hash(session, "u"), "n")
    assert got is not None and got.history[0].user.startswith("my key is ***")


@asynccontextmanager
async def _server(
    folder: Path, kind: str, redis: RedisServer, *replies: ScriptedReply
) -> AsyncIterator[tuple[Server, Raw, FakeOpenAI]]:
    settings = SessionSettings(store="memory" if kind == "memory" else redis.url)
    async with serving(folder, *replies, sessions=settings) as (llm, server):
        assert server.state is not None
        store = server.state.store
        if isinstance(store, MemoryStore):
            yield server, _raw_memory(store), llm
        else:
            yield server, _raw_redis(redis.url), llm


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_secret_said_in_a_session_is_not_in_its_stored_record(
    tmp_path: Path, redis_server: RedisServer, kind: str
) -> None:
    replies = (
        ScriptedReply.of(f"I will not repeat {MODEL_KEY}."),
        ScriptedReply.of(LONG_REPLY),
        ScriptedReply.of("Yes."),
    )
    async with _server(tmp_path, kind, redis_server, *replies) as (server, raw, llm):
        async with connect(server.ws_url) as ws:
            started = await start(ws)
            session = started["session"]
            await send(ws, type="user.message", text=f"Remember my key {USER_KEY} please.")
            await read_turn(ws)
            # A turn running when the connection drops: its text is kept too.
            await send(ws, type="user.message", text=f"And this one: {USER_KEY}")
            with anyio.fail_after(GUARD_S):
                while not isinstance(await ws.recv(), bytes):
                    pass  # speaking now
            ws.transport.abort()
        with anyio.fail_after(GUARD_S):
            while "And this one" not in (stored := await raw(session)):
                await anyio.sleep(0.02)
        _assert_no_secret(stored)
        assert "Remember my key ***" in stored and "And this one: ***" in stored
        async with connect(server.ws_url) as ws:  # the session still resumes
            back = await resumed(ws, started)
            assert back["turns"] == 2
            await send(ws, type="user.message", text="Still there?")
            assert (await read_turn(ws)).end["heard"] == "Yes."
    sent = texts(llm.requests[2].body)  # the resumed session's request: the history restored
    assert sent[0][1].startswith("Remember my key") and sent[-1][1].endswith("Still there?")


# The store's password: on no worker's command line, in no message.

ODD_PASSWORD = "Tr0ub4dor/&3#x?y-hostile"


async def test_the_store_password_is_on_no_worker_command_line(tmp_path: Path) -> None:
    from tests.serve_helpers import write_pipeline
    from tests.test_serve_workers import serve_group

    pipeline = write_pipeline(tmp_path, "short", "Hello.")
    with RedisServer(password=ODD_PASSWORD) as redis:  # requirepass: a worker without it fails
        assert "%2F" in redis.url  # percent-encoded, as a URL must hold it
        async with serve_group(pipeline, "--session-store", redis.url) as group:
            for pid in group.pids:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
                assert "serve" in cmdline and "--pipeline" in cmdline  # a worker's
                assert "hostile" not in cmdline and "Tr0ub4dor" not in cmdline, cmdline
                assert "--session-store" not in cmdline
            async with connect(group.ws_url) as ws:  # the workers reached Redis with it
                started = await start(ws)
                await send(ws, type="user.message", text="Hi.")
                await read_turn(ws)
                ws.transport.abort()
            async with connect(group.ws_url) as ws:  # any worker: they share the store
                assert (await resumed(ws, started))["turns"] == 1
            warned = [r["line"] for r in group.events("text")]
    assert any("--session-store shows the store's password" in line for line in warned), warned


@pytest.mark.parametrize(
    ("odd", "where"),
    [("/", "flag"), ("#", "env"), ("?", "config")],  # each character, each way in
)
def test_a_store_url_that_does_not_parse_is_one_line_without_the_password(
    tmp_path: Path, odd: str, where: str
) -> None:
    import os
    import subprocess
    import sys

    from tests.resume_helpers import REPO, cloud_pipeline

    url = f"redis://:Leak1{odd}Leak2@127.0.0.1:6379/0"  # the password not percent-encoded
    env = {**os.environ, "PYTHONPATH": str(REPO), KEY_ENV: "k"}
    extra: list[str] = []
    if where == "flag":
        extra = ["--session-store", url]
    elif where == "env":
        env["VOICE_MEMBRANE_SESSION_STORE"] = url
    else:
        config = tmp_path / "serve.toml"
        config.write_text(f'[sessions]\nstore = "{url}"\n', encoding="utf-8")
        extra = ["--config", str(config)]
    pipeline = cloud_pipeline(tmp_path, "http://127.0.0.1:9")
    command = [sys.executable, "-m", "voice_membrane.cli", "serve", "--pipeline", str(pipeline)]
    done = subprocess.run(
        [*command, "--port", "0", "--workers", "2", *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=GUARD_S,
    )
    assert done.returncode not in (0, None)
    said = done.stdout + done.stderr
    assert "Leak" not in said, said
    assert done.stdout == "" and done.stderr.count("\n") == 1, said
    assert "Traceback" not in said and "percent-encode" in said, said


def test_a_secret_option_however_spelled_stays_off_the_workers_command_line() -> None:
    from voice_membrane.cli.main import _parse
    from voice_membrane.cli.serve_command import _worker_argv

    url = "redis://:hunter2-very-secret@db:6379/0"
    argv = ["serve", "--port", "0", "--session-st", url, "--tok=abcdefgh", "--workers", "2"]
    assert _parse(argv).session_store == url  # argparse takes the prefix for the option
    for spelled in (argv, ["serve", f"--session-store={url}"], ["serve", "--session-store", url]):
        kept = _worker_argv(spelled)
        assert not any("hunter2" in arg or "abcdefgh" in arg for arg in kept), kept
    assert _worker_argv(argv) == ["serve", "--port", "0", "--workers", "2"]

"""serve checks every limit before it builds anything for a session: a start that
is refused — over ``max_sessions`` (one at a time or many at once), with a wrong
token, for a pipeline the server does not have, while flooding, or once the
server drains — starts no MCP server, builds no parts. Counted for real: the
pipeline's MCP server appends a line to a file each time a process of it
starts, and ``build_parts`` is watched. ``serve`` has a default limit, and says
it."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.serve_helpers import GUARD_S, SHORT_REPLY, next_event, send, start, write_pipeline
from voice_membrane.server import Server
from voice_membrane.server import connection as connection_module
from voice_membrane.server.state import DEFAULT_MAX_SESSIONS, ServerState

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent
TOKEN = "start-limits-token-0123456789"


def mcp_pipeline(folder: Path, marker: Path) -> Path:
    """A recorded pipeline with one stdio MCP server that notes each start in ``marker``."""
    path = write_pipeline(folder, "tools", SHORT_REPLY)
    command = [sys.executable, "-m", "voice_membrane.testing.mcp_weather"]
    command += ["--started-file", str(marker)]
    path.write_text(
        path.read_text(encoding="utf-8")
        + f"\n[[tools.mcp]]\ncommand = {json.dumps(command)}\n"
        + f"env = {{ PYTHONPATH = {json.dumps(str(ROOT))} }}\n",
        encoding="utf-8",
    )
    return path


def started(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each session's ``build_parts`` call, counted (the real one still runs)."""
    calls: list[str] = []
    real = connection_module.build_parts

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append("build")
        return real(*args, **kwargs)

    monkeypatch.setattr(connection_module, "build_parts", counted)
    yield calls


@asynccontextmanager
async def mcp_server(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[Server, Path]]:
    marker = tmp_path / "started.txt"
    pipeline = mcp_pipeline(tmp_path, marker)
    options.setdefault("log", lambda *args, **fields: None)
    # No preload: the only MCP processes are the sessions' own.
    async with Server([pipeline], port=0, preload=False, **options) as server:
        yield server, marker


async def refused(ws: ClientConnection) -> tuple[int | None, list[str]]:
    """The codes of the error events until the server closes, and its close code."""
    codes: list[str] = []
    with anyio.fail_after(GUARD_S):
        with contextlib.suppress(ConnectionClosed):
            while True:
                data = await ws.recv()
                if isinstance(data, str) and (event := json.loads(data))["type"] == "error":
                    codes.append(event["code"])
    return ws.close_code, codes


async def test_one_session_over_the_limit_starts_nothing(tmp_path: Path, builds: list[str]) -> None:
    async with (
        mcp_server(tmp_path, max_sessions=1) as (server, marker),
        connect(server.ws_url) as first,
    ):
        await start(first)
        assert started(marker) == 1 and len(builds) == 1
        async with connect(server.ws_url) as extra:
            await send(extra, type="session.start")
            assert await refused(extra) == (1013, ["full"])
        assert started(marker) == 1 and len(builds) == 1
        assert server.state is not None and server.state.sessions == 1


async def test_many_starts_at_once_build_only_what_the_limit_allows(
    tmp_path: Path, builds: list[str]
) -> None:
    outcomes: list[str] = []

    async def outcome(ws: ClientConnection) -> None:
        first = await next_event(ws)
        outcomes.append(first["type"] if first["type"] != "error" else first["code"])

    async with (
        mcp_server(tmp_path, max_sessions=2) as (server, marker),
        contextlib.AsyncExitStack() as stack,
    ):
        sockets = [await stack.enter_async_context(connect(server.ws_url)) for _ in range(5)]
        for ws in sockets:  # all sent before any is answered
            await send(ws, type="session.start")
        async with anyio.create_task_group() as tg:
            for ws in sockets:
                tg.start_soon(outcome, ws)
        assert sorted(outcomes) == ["full"] * 3 + ["session.started"] * 2
        assert started(marker) == 2 and len(builds) == 2


async def test_starts_refused_for_other_reasons_build_nothing(
    tmp_path: Path, builds: list[str]
) -> None:
    async with mcp_server(tmp_path, token=TOKEN) as (server, marker):
        # A wrong token.
        async with connect(server.ws_url) as ws:
            await send(ws, type="session.start", token="wrong")
            assert (await refused(ws))[0] == 4401
        # A pipeline this server does not have (the client may try again).
        async with connect(server.ws_url) as ws:
            await send(ws, type="session.start", pipeline="anthropic", token=TOKEN)
            assert (await next_event(ws))["code"] == "pipeline_not_allowed"
        # A flood before the start: closed, the start among the messages dropped.
        async with connect(server.ws_url) as ws:
            with contextlib.suppress(ConnectionClosed):
                for _ in range(60):
                    await send(ws, type="session.start", token=TOKEN, pipeline="nope")
            assert (await refused(ws))[0] == 1008
        # The server began to drain while the client was deciding.
        async with connect(server.ws_url) as ws:
            assert server.state is not None
            server.state.draining.set()
            await send(ws, type="session.start", token=TOKEN)
            assert await refused(ws) == (1013, ["draining"])
        assert started(marker) == 0 and builds == []
        assert server.state.sessions == 0


def test_serve_has_a_default_limit_and_says_it() -> None:
    assert ServerState({}).max_sessions == DEFAULT_MAX_SESSIONS
    help_text = subprocess.run(
        [sys.executable, "-m", "voice_membrane.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    said = " ".join(help_text.split())
    assert f"before building anything for them ({DEFAULT_MAX_SESSIONS}:" in said
    assert "0: no limit" in said

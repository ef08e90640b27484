"""Resume with the memory store, in process: a dropped client resumes its session
and the next turn's request carries the earlier turns; a turn cut by the drop is
reported with what was heard; wrong, spent and forged tokens are refused with
4410; a newer connection supersedes an older one (4409); hostile resumes get
bad_message; a turn is stored before its turn.end is sent."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.resume_helpers import KEY_ENV, resume, resumed, serving, texts
from tests.serve_helpers import GUARD_S, LONG_REPLY, next_event, read_turn, send, start
from voice_membrane.testing.script import ScriptedReply

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "k")


async def _closed(ws: object) -> tuple[int | None, list[dict[str, object]]]:
    """The events up to the close, and the close code."""
    events = []
    with anyio.fail_after(GUARD_S):
        try:
            while True:
                data = await ws.recv()  # type: ignore[attr-defined]
                if isinstance(data, str):
                    events.append(json.loads(data))
        except ConnectionClosed as exc:
            return (exc.rcvd.code if exc.rcvd else None), events


async def test_a_dropped_client_resumes_and_the_next_request_carries_the_history(
    tmp_path: Path,
) -> None:
    replies = [ScriptedReply.of("Hello, Ada."), ScriptedReply.of("Paris, as you said.")]
    async with serving(tmp_path, *replies) as (llm, server):
        async with connect(server.ws_url) as ws:
            started = await start(ws)
            assert len(started["resume_token"]) >= 40 and started["resume_grace_s"] == 120
            await send(ws, type="user.message", text="I live in Paris.")
            first = await read_turn(ws)
            assert first.end["heard"] == "Hello, Ada."
            ws.transport.abort()  # the network drops: no closing handshake
        async with connect(server.ws_url) as ws:
            back = await resumed(ws, started)
            assert back["session"] == started["session"]
            assert back["turns"] == 1 and back["pipeline"] == "chat"
            assert back["last_turn"] == {
                "turn": 1,
                "fate": "complete",
                "text": "I live in Paris.",
                "heard": "Hello, Ada.",
                "error": None,
            }
            assert back["resume_token"] != started["resume_token"]  # single use
            await send(ws, type="user.message", text="Where do I live?")
            second = await read_turn(ws)
            assert second.end["turn"] == 2  # numbering goes on
    assert texts(llm.requests[1].body) == [
        ("user", "I live in Paris."),
        ("assistant", "Hello, Ada."),
        ("user", "Where do I live?"),
    ]


async def test_a_turn_cut_by_the_drop_is_reported_with_what_was_heard(tmp_path: Path) -> None:
    async with serving(tmp_path, ScriptedReply.of(LONG_REPLY), ScriptedReply.of("Sure.")) as (
        llm,
        server,
    ):
        async with connect(server.ws_url) as ws:
            started = await start(ws)
            await send(ws, type="user.message", text="Tell me the weather.")
            audio = 0
            with anyio.fail_after(GUARD_S):
                while audio < 60:  # over a second of speech heard
                    audio += isinstance(await ws.recv(), bytes)
            ws.transport.abort()
        async with connect(server.ws_url) as ws:
            back = await resumed(ws, started)
            last = back["last_turn"]
            assert last["turn"] == 1 and last["fate"] == "interrupted"
            assert last["text"] == "Tell me the weather."
            assert last["heard"] and LONG_REPLY.startswith(last["heard"].rstrip("…. "))
            assert len(last["heard"]) < len(LONG_REPLY)
            await send(ws, type="user.message", text="Go on.")
            await read_turn(ws)
    history = texts(llm.requests[1].body)
    assert history[0] == ("user", "Tell me the weather.")
    assert history[1][0] == "assistant" and history[1][1] != LONG_REPLY  # only what was heard
    assert history[2] == ("user", "Go on.")


async def test_wrong_spent_and_ended_tokens_are_refused_with_4410(tmp_path: Path) -> None:
    async with serving(tmp_path) as (_llm, server):
        async with connect(server.ws_url) as ws:
            started = await start(ws)
            ws.transport.abort()
        async with connect(server.ws_url) as ws:
            await resume(ws, {**started, "resume_token": "x" * 43})
            code, events = await _closed(ws)
        assert code == 4410
        assert [e["code"] for e in events] == ["resume_failed"]
        assert "start a new one" in str(events[0]["message"])
        async with connect(server.ws_url) as ws:  # the right one still works once
            again = await resumed(ws, started)
            ws.transport.abort()
        async with connect(server.ws_url) as ws:  # spent: a token is single use
            await resume(ws, started)
            assert (await _closed(ws))[0] == 4410
        async with connect(server.ws_url) as ws:  # the new one, then session.end
            await resumed(ws, again)
            await send(ws, type="session.end")
            assert (await _closed(ws))[0] == 1000
        async with connect(server.ws_url) as ws:  # nothing kept after an end
            await resume(ws, again)
            assert (await _closed(ws))[0] == 4410


async def test_a_newer_connection_supersedes_the_older_one(tmp_path: Path) -> None:
    async with (
        serving(tmp_path, ScriptedReply.of("One."), ScriptedReply.of("Two.")) as (
            llm,
            server,
        ),
        connect(server.ws_url) as old,
    ):
        started = await start(old)
        await send(old, type="user.message", text="First.")
        await read_turn(old)
        # The old connection still looks alive (a half-open socket): the
        # client resumes from a new one, which wins.
        async with connect(server.ws_url) as new:
            back = await resumed(new, started)
            assert back["turns"] == 1
            code, events = await _closed(old)
            assert code == 4409
            assert [e.get("code") for e in events] == ["superseded"]
            await send(new, type="user.message", text="Second.")
            await read_turn(new)
    assert texts(llm.requests[1].body)[:2] == [("user", "First."), ("assistant", "One.")]


@pytest.mark.parametrize(
    "fields",
    [
        {"session": "s" + "a" * 60_000},
        {"session": "../../etc/passwd"},
        {"session": 12},
        {"resume_token": "t" * 5000},
        {"resume_token": ""},
        {"resume_token": None},
    ],
)
async def test_a_hostile_resume_gets_bad_message(tmp_path: Path, fields: dict[str, object]) -> None:
    async with serving(tmp_path) as (_llm, server), connect(server.ws_url) as ws:
        message = {"type": "session.resume", "session": "s" + "a" * 16}
        message["resume_token"] = "t"
        await ws.send(json.dumps({**message, **fields}))
        event = await next_event(ws)
        assert event["type"] == "error" and event["code"] == "bad_message", event
        assert "Traceback" not in event["message"]
        assert len(event["message"]) < 300


async def test_an_expired_session_is_refused_with_4410(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voice_membrane.server import session_store

    async with serving(tmp_path) as (_llm, server):
        async with connect(server.ws_url) as ws:
            started = await start(ws)
            ws.transport.abort()
        with anyio.fail_after(GUARD_S):
            while server.state is not None and server.state.sessions:
                await anyio.sleep(0.02)  # its last record written
        later = session_store.monotonic() + server.sessions.grace_s + 1
        monkeypatch.setattr(session_store, "monotonic", lambda: later)
        async with connect(server.ws_url) as ws:
            await resume(ws, started)
            code, events = await _closed(ws)
    assert code == 4410 and [e["code"] for e in events] == ["resume_failed"]


async def test_a_resume_needs_the_servers_token_as_a_start_does(tmp_path: Path) -> None:
    secret = "a-server-token-of-some-length"
    async with serving(tmp_path, token=secret) as (_llm, server):
        async with connect(server.ws_url) as ws:
            started = await start(ws, token=secret)
            ws.transport.abort()
        async with connect(server.ws_url) as ws:  # the resume token alone is not enough
            await resume(ws, started)
            code, events = await _closed(ws)
        assert code == 4401 and events == []  # nothing said before authentication
        async with connect(server.ws_url) as ws:
            await resume(ws, started, token=secret)
            assert (await next_event(ws))["type"] == "session.resumed"


async def _one_turn(tmp_path: Path, read: Callable[[], object] = lambda: None) -> float:
    """A session's one typed turn (its answer checked), ``read`` called the moment
    its ``turn.end`` is read: the seconds from its last audio frame to that."""
    async with (
        serving(tmp_path, ScriptedReply.of("Hello, Ada.")) as (_, server),
        connect(server.ws_url) as ws,
    ):
        await start(ws)
        await send(ws, type="user.message", text="I live in Paris.")
        last_frame = anyio.current_time()
        with anyio.fail_after(GUARD_S):
            while isinstance(data := await ws.recv(), bytes) or (
                json.loads(data)["type"] != "turn.end"
            ):
                if isinstance(data, bytes):
                    last_frame = anyio.current_time()
        read()
        assert json.loads(data)["heard"] == "Hello, Ada."
        return anyio.current_time() - last_frame


async def test_a_turn_is_stored_before_the_client_is_told_it_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that resumes on another process the moment it reads ``turn.end``
    finds the turn stored: its record is written first. The store here is slow
    (each write takes 0.3 s), so a ``turn.end`` sent ahead of it would be seen first."""
    from voice_membrane.server.session_store import MemoryStore

    order: list[str] = []
    save = MemoryStore.save

    async def slow_save(self: MemoryStore, record: Any, token_hash: str, owner: str) -> bool:
        await anyio.sleep(0.3)
        saved = await save(self, record, token_hash, owner)
        if record.history and record.running is None:
            order.append(f"stored {len(record.history)} turn(s)")
        return saved

    monkeypatch.setattr(MemoryStore, "save", slow_save)
    await _one_turn(tmp_path, lambda: order.append("turn.end read"))
    assert order[:2] == ["stored 1 turn(s)", "turn.end read"], order


async def test_a_store_that_hangs_holds_a_turn_end_one_second_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voice_membrane.server.resume import TURN_END_WAIT_S
    from voice_membrane.server.session_store import MemoryStore

    async def stuck(self: MemoryStore, record: Any, token_hash: str, owner: str) -> bool:
        await anyio.sleep_forever()
        return True

    monkeypatch.setattr(MemoryStore, "save", stuck)
    # (the frame's delivery may lag its send on a loaded machine: half the wait)
    assert await _one_turn(tmp_path) >= TURN_END_WAIT_S / 2  # it did wait for the store

"""The session stores, memory and a real redis-server (one per module): a round
trip, single-use tokens, ownership (a superseded connection cannot write), the
bound, expiry with the grace period, what is kept of a token (its hash only),
and a Redis lost mid-session (writes held, resumes refused, all written once it
is back, one warning and one notice)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.server import session_store
from voice_membrane.server.reconnecting_store import ReconnectingStore
from voice_membrane.server.redis_store import RedisStore, safe_url
from voice_membrane.server.session_store import (
    LastTurn,
    MemoryStore,
    SessionRecord,
    SessionStore,
    StoredTurn,
    bounded_json,
    new_owner,
    token_hash,
)
from voice_membrane.server.state import new_session_id
from voice_membrane.testing.redis_server import RedisServer

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        yield MemoryStore(grace_s=60)
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    redis = RedisStore(server.url, grace_s=60)
    await redis.open()
    yield redis
    await redis.aclose()


def _record(session: str, turns: int = 2, **fields: Any) -> SessionRecord:
    history = tuple(
        StoredTurn(user=f"question {i}", heard=f"answer {i}", participant="Ada")
        for i in range(turns)
    )
    last = LastTurn(turn=turns, fate="complete", text=f"question {turns - 1}", heard="answer")
    return SessionRecord(
        session=session, pipeline="chat", turn=turns, history=history, last_turn=last, **fields
    )


async def test_a_record_round_trips_and_a_token_is_spent_once(store: SessionStore) -> None:
    session, owner = new_session_id(), new_owner()
    token, fresh, wrong = "t-one", "t-two", "t-wrong"
    record = _record(session, running=3, running_text="and then?")
    assert await store.save(record, token_hash(session, token), owner)
    assert await store.claim(session, token_hash(session, wrong), "x", "o") is None
    # A token for another session is another hash: it opens nothing here.
    other = new_session_id()
    assert await store.claim(session, token_hash(other, token), "x", "o") is None
    newer = new_owner()
    got = await store.claim(session, token_hash(session, token), token_hash(session, fresh), newer)
    assert got == record
    assert got.resumed_last_turn() == LastTurn(turn=3, fate="cancelled", text="and then?")
    assert await store.claim(session, token_hash(session, token), "y", "p") is None  # spent
    # The older connection's writes are refused now; the newer one's go through.
    assert not await store.save(_record(session, 5), token_hash(session, token), owner)
    assert await store.save(_record(session, 4), token_hash(session, fresh), newer)
    await store.forget(session, owner)  # not its to forget
    again = await store.claim(session, token_hash(session, fresh), "z", newer)
    assert again is not None and again.turn == 4
    await store.forget(session, newer)
    assert await store.claim(session, "z", "w", newer) is None
    assert await store.claim(new_session_id(), "z", "w", newer) is None  # never kept


async def test_a_record_past_the_bound_drops_its_oldest_turns(store: SessionStore) -> None:
    store.max_bytes = 16 * 1024
    session, owner = new_session_id(), new_owner()
    record = _record(session, turns=400)
    assert len(record.model_dump_json()) > store.max_bytes
    assert await store.save(record, token_hash(session, "t"), owner)
    got = await store.claim(session, token_hash(session, "t"), token_hash(session, "u"), owner)
    assert got is not None
    assert len(got.model_dump_json().encode()) <= store.max_bytes
    assert got.history[-1] == record.history[-1]  # the newest kept, the oldest dropped
    assert got.first_kept == 400 - len(got.history) and got.turn == 400


@settings(max_examples=60, deadline=None)
@given(
    turns=st.lists(st.tuples(st.text(max_size=300), st.text(max_size=900)), max_size=40),
    heard=st.text(max_size=3000),
    bound=st.integers(min_value=1500, max_value=40_000),
)
def test_the_bound_keeps_the_newest_turns_that_fit(
    turns: list[tuple[str, str]], heard: str, bound: int
) -> None:
    history = tuple(StoredTurn(user=u, heard=h, participant="Ada") for u, h in turns)
    last = LastTurn(turn=len(turns), fate="interrupted", heard=heard)
    record = SessionRecord(
        session=new_session_id(), pipeline="p", history=history, last_turn=last, first_kept=7
    )
    text = bounded_json(record, bound)
    kept = SessionRecord.model_validate_json(text)
    assert len(text.encode()) <= bound
    n = len(kept.history)
    assert kept.history == history[len(history) - n :]  # a suffix: the newest turns
    assert kept.first_kept == 7 + len(history) - n
    assert kept.last_turn is not None and heard.startswith(kept.last_turn.heard)
    if len(record.model_dump_json().encode()) <= bound:
        assert kept == record


async def test_a_memory_record_expires_with_the_grace_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(session_store, "monotonic", lambda: now[0])
    store = MemoryStore(grace_s=120)
    session = new_session_id()
    await store.save(_record(session), token_hash(session, "t"), "o")
    now[0] += 119
    assert await store.claim(session, token_hash(session, "t"), token_hash(session, "u"), "o")
    now[0] += 121  # the claim renewed it for a grace period: now it is gone
    assert await store.claim(session, token_hash(session, "u"), "v", "o") is None
    assert len(store) == 0


async def test_a_redis_record_expires_with_the_grace_period(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, grace_s=1)
    session = new_session_id()
    await store.save(_record(session), token_hash(session, "t"), "o")
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    keys = sorted(await client.keys(f"vm:{{{session}}}:*"))
    assert keys == [f"vm:{{{session}}}:claim", f"vm:{{{session}}}:record"]
    assert [0 < await client.ttl(key) <= 1 for key in keys] == [True, True]
    # Only the token's hash is kept, never the token.
    claim = await client.hgetall(keys[0])
    assert claim["token"] == token_hash(session, "t") and "t" not in claim.values()
    await anyio.sleep(1.3)
    assert await store.claim(session, token_hash(session, "t"), "u", "o") is None
    assert await client.keys(f"vm:{{{session}}}:*") == []
    await client.aclose()
    await store.aclose()


async def test_redis_unreachable_at_start_is_one_line() -> None:
    from voice_membrane.server.session_store import StoreUnavailable
    from voice_membrane.testing.redis_server import free_port

    store = RedisStore(f"redis://:hunter2secret@127.0.0.1:{free_port()}/0")
    with pytest.raises(StoreUnavailable) as caught:
        await store.open()
    message = str(caught.value)
    assert message.startswith("session store redis://127.0.0.1:") and "\n" not in message
    assert "hunter2secret" not in message


def test_a_url_shown_has_no_password() -> None:
    assert safe_url("redis://user:pw@10.0.0.5:6380/2") == "redis://10.0.0.5:6380/2"
    assert safe_url("rediss://:pw@[::1]:6379/0") == "rediss://[::1]:6379/0"


async def test_redis_lost_holds_the_writes_and_writes_them_once_it_is_back() -> None:
    from voice_membrane.server.session_store import StoreUnavailable

    logged: list[tuple[str, dict[str, Any]]] = []
    backs: list[bool] = []
    with RedisServer() as server:  # its own: this test stops it
        store = ReconnectingStore(
            RedisStore(server.url, grace_s=60), lambda e, **f: logged.append((e, f))
        )
        store.on_back = lambda: backs.append(True)
        await store.open()
        one, two, ended = new_session_id(), new_session_id(), new_session_id()
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.keep_up)
            assert await store.save(_record(one, 1), token_hash(one, "t"), "o")
            server.kill()
            assert await store.save(_record(one, 2), token_hash(one, "t"), "o")
            assert await store.save(_record(two, 1), token_hash(two, "t"), "o")
            assert await store.save(_record(ended, 1), token_hash(ended, "t"), "o")
            await store.forget(ended, "o")
            assert store.lost
            with pytest.raises(StoreUnavailable):  # try again, not "unknown"
                await store.claim(one, token_hash(one, "t"), token_hash(one, "u"), "n")
            server.restart()  # on its port, empty
            with anyio.fail_after(30):
                while store.lost:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        got = await store.claim(one, token_hash(one, "t"), token_hash(one, "u"), "n")
        assert got is not None and got.turn == 2  # the newest write held
        assert await store.claim(two, token_hash(two, "t"), token_hash(two, "u"), "n")
        assert await store.claim(ended, token_hash(ended, "t"), "u", "n") is None
        await store.aclose()
    assert [event for event, _ in logged] == ["session_store_lost", "session_store_back"]
    assert logged[0][1]["level"] == "warning" and logged[1][1]["written"] == 3
    assert backs == [True]


async def test_a_write_held_past_its_grace_period_is_dropped_not_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from voice_membrane.server import reconnecting_store

    now = [1000.0]
    monkeypatch.setattr(reconnecting_store, "monotonic", lambda: now[0])
    logged: list[tuple[str, dict[str, Any]]] = []
    with RedisServer() as server:
        store = ReconnectingStore(
            RedisStore(server.url, grace_s=60), lambda e, **f: logged.append((e, f))
        )
        await store.open()
        stale, fresh = new_session_id(), new_session_id()
        server.kill()
        assert await store.save(_record(stale), token_hash(stale, "t"), "o")
        now[0] += 59
        assert await store.save(_record(fresh), token_hash(fresh, "t"), "o")
        now[0] += 2  # the first one's grace period is over: its session is gone
        server.restart()
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.keep_up)
            with anyio.fail_after(30):
                while store.lost:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        assert 0 < await client.ttl(f"vm:{{{fresh}}}:record") <= 58  # what was left of it
        await client.aclose()
        assert await store.claim(stale, token_hash(stale, "t"), "u", "n") is None
        assert await store.claim(fresh, token_hash(fresh, "t"), "u", "n") is not None
        await store.aclose()
    assert logged[-1][0] == "session_store_back" and logged[-1][1]["written"] == 1

"""A long session's memory stays bounded: the history keeps only what later
requests need (user text, heard text, who spoke, how the turn ended), a turn
dropped from the requests is forgotten, the kept history is bounded in turns
and in characters whatever the model's context, and only the last few turns
keep their full result (blocks, report). Checked structurally: the results
alive after many turns are counted, not the process's memory."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from session_helpers import REPLY, AskedSource, SilentEngine, write_recording

from voice_membrane.pipeline.history import EstimatedTokens
from voice_membrane.pipeline.metrics import LatencyReport
from voice_membrane.pipeline.session import RECENT_RESULTS, Session
from voice_membrane.pipeline.turn import TurnResult
from voice_membrane.sinks.null import NullSink

pytestmark = pytest.mark.anyio
TURNS = 3 * RECENT_RESULTS + 5


def alive(kind: type) -> int:
    gc.collect()
    return sum(isinstance(thing, kind) for thing in gc.get_objects())


def said(n: int) -> str:
    return f"Question {n}: will it rain?"


async def test_only_the_recent_full_results_are_kept(tmp_path: Path) -> None:
    source = AskedSource(write_recording(tmp_path / "reply.jsonl"))
    session = Session(source, SilentEngine(), NullSink())  # no context budget at all
    async with session:
        before = alive(TurnResult), alive(LatencyReport)
        for n in range(TURNS):
            result = await session.turn(said(n))
        del result
        results, reports = alive(TurnResult) - before[0], alive(LatencyReport) - before[1]
    assert len(session.recent) == RECENT_RESULTS
    assert results <= RECENT_RESULTS and reports <= RECENT_RESULTS, (results, reports)
    # What the history keeps is what the next request needs.
    assert len(session.history) == TURNS
    assert all(r.heard == REPLY and r.outcome == "complete" for r in session.history)
    assert session.request("next").messages[-3].content[0].text == said(TURNS - 1)  # type: ignore[union-attr]


async def test_turns_dropped_from_the_requests_are_forgotten(tmp_path: Path) -> None:
    source = AskedSource(write_recording(tmp_path / "reply.jsonl"))
    session = Session(source, SilentEngine(), NullSink(), context=EstimatedTokens(300))
    async with session:
        for n in range(40):
            result = await session.turn(said(n))
            fitted = result.report.context
            assert fitted is not None
            # Every turn the request no longer holds is gone from memory too.
            assert session.first_kept == fitted.dropped
            assert len(session.history) == fitted.kept + 1
            assert session.turns == n + 1
    assert session.first_kept > 20  # the budget forced many drops
    users = [m.content for m in source.asked[-1] if m.role == "user"]
    assert users[-1] == said(39) and users[0] == said(result.report.context.dropped)  # type: ignore[union-attr]


@pytest.mark.parametrize(("turns", "chars"), [(5, 10**6), (1000, 700)])
async def test_the_history_is_bounded_in_turns_and_in_characters(
    tmp_path: Path, turns: int, chars: int
) -> None:
    source = AskedSource(write_recording(tmp_path / "reply.jsonl"))
    session = Session(
        source, SilentEngine(), NullSink(), max_history_turns=turns, max_history_chars=chars
    )
    async with session:
        for n in range(30):
            await session.turn(said(n))
            assert len(session.history) <= turns
            assert sum(r.chars for r in session.history) <= chars
            assert session.turns == n + 1
    kept = len(session.history)
    assert 0 < kept < 30 and session.first_kept == 30 - kept
    # The next request holds exactly the kept turns, newest last.
    users = [m for m in session.request("next").messages if m.participant == "User"]
    assert [m.content[0].text for m in users[:-1]] == [said(n) for n in range(30 - kept, 30)]  # type: ignore[union-attr]


async def test_one_turn_longer_than_the_bound_is_still_kept(tmp_path: Path) -> None:
    source = AskedSource(write_recording(tmp_path / "reply.jsonl"))
    session = Session(source, SilentEngine(), NullSink(), max_history_chars=10)
    async with session:
        await session.turn("a long question")
        await session.turn("another long question")
    assert [r.user_text for r in session.history] == ["another long question"]

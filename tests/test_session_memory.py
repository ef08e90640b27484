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
from session_helpers import REPLY, AskedSource, write_recording

from voice_membrane.membrane.membrane import Membrane
from voice_membrane.pipeline.history import EstimatedTokens
from voice_membrane.pipeline.metrics import LatencyReport
from voice_membrane.pipeline.session import RECENT_RESULTS, Session
from voice_membrane.pipeline.turn import TurnResult
from voice_membrane.providers.gemini import GeminiProvider
from voice_membrane.sinks.null import NullSink
from voice_membrane.storage.blobs import MemoryBlobStore
from voice_membrane.testing.fake_gemini import FakeGemini
from voice_membrane.testing.png import solid_png
from voice_membrane.testing.script import ScriptedReply, image, text
from voice_membrane.testing.silent_engine import SilentEngine
from voice_membrane.vocab.messages import Base64Source, ImageContent, RequestOptions

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


async def test_images_held_in_memory_go_with_their_turns() -> None:
    """serve's sessions keep images in memory: a generated image stays while a
    recent result refers to it, an attached one while its turn is still sent or
    it awaits its turn; the rest is released."""
    replies = [
        ScriptedReply.of(image(solid_png(4, 4, (n, 0, 0))), text("Here it is."))
        for n in range(TURNS)
    ]
    store = MemoryBlobStore()
    with FakeGemini(*replies) as server:
        provider = GeminiProvider(api_key="fake-key", base_url=server.base_url)
        session = Session(
            Membrane(provider, image_store=store.store),
            SilentEngine(),
            NullSink(),
            blob_store=store,
            options=RequestOptions(provider_params={"response_modalities": ["TEXT", "IMAGE"]}),
            max_history_turns=4,
        )
        async with session:
            shown = await session.attach_image(solid_png(2, 2, (0, 0, 255)))
            later = await session.attach_image(solid_png(2, 2, (0, 255, 0)))
            await session.turn("What is this?", attachments=(shown,))
            assert await store.exists(later.source.blob_id)  # type: ignore[union-attr]
            await session.turn("And this?", attachments=(later,))
            for n in range(2, TURNS):
                await session.turn(f"Another one, {n}.")
                assert len(store) <= RECENT_RESULTS
        await provider.aclose()
    made = [r.blocks[0].image.blob_id for r in session.recent]  # type: ignore[union-attr]
    assert len(made) == RECENT_RESULTS and set(made) == set(store._blobs)
    assert not await store.exists(shown.source.blob_id)  # type: ignore[union-attr]


async def test_an_inline_image_counts_in_the_bound(tmp_path: Path) -> None:
    source = AskedSource(write_recording(tmp_path / "reply.jsonl"))
    picture = ImageContent(source=Base64Source(media_type="image/png", data="A" * 4000))
    session = Session(source, SilentEngine(), NullSink(), max_history_chars=6000)
    async with session:
        await session.turn("one", attachments=(picture,))
        await session.turn("two", attachments=(picture,))
    assert [r.user_text for r in session.history] == ["two"]

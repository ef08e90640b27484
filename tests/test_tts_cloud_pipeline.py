"""Cloud voices in a session: barge-in stops the audio at once and keeps what was
heard, and the next turn starts clean — no task or connection left behind."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from pathlib import Path

import anyio
import pytest

from tests.session_helpers import write_recording
from voice_membrane.pipeline.session import Session
from voice_membrane.pipeline.turn import TurnResult
from voice_membrane.providers.base import ChatMessage
from voice_membrane.providers.replay import ReplaySource
from voice_membrane.sinks.null import NullSink
from voice_membrane.testing.fake_elevenlabs import FakeElevenLabs
from voice_membrane.testing.fake_openai_speech import FakeOpenAISpeech
from voice_membrane.testing.fake_speech import SpeechScript, SpeechServer
from voice_membrane.tts.options import TtsOptions
from voice_membrane.tts.registry import create_engine

pytestmark = pytest.mark.anyio

REPLY = (
    "The first sentence is short. The second sentence runs a little longer than that. "
    "A third one follows it here. And a fourth sentence closes the reply."
)
SHORT = "Done now."
RATE = 22050
# (--tts spec, the fake speaking its protocol)
ENGINES: list[tuple[str, Callable[..., SpeechServer]]] = [
    ("elevenlabs:fake-voice", FakeElevenLabs),
    ("elevenlabs-http:fake-voice", FakeElevenLabs),
    ("openai:alloy", FakeOpenAISpeech),
]


@pytest.fixture(params=ENGINES, ids=[e[0] for e in ENGINES])
def voice(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, SpeechServer]]:
    spec, fake = request.param
    # Paced like speech: audio arrives no faster than it plays.
    with fake(*[SpeechScript(char_s=0.05)] * 50) as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        yield spec, server


class Replies:
    """A recorded reply per turn, in order."""

    def __init__(self, *replies: ReplaySource) -> None:
        self.all, self.replies = replies, list(replies)
        self.name, self.mode = replies[0].name, replies[0].mode

    async def start(self) -> None:
        for reply in self.replies:
            await reply.start()

    def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]:
        return self.replies.pop(0).stream(messages)

    async def aclose(self) -> None:
        for reply in self.all:
            await reply.aclose()


def words_prefix(heard: str, text: str) -> bool:
    """``heard`` is ``text`` up to the end of one of its words."""
    return text.startswith(heard) and (
        len(heard) == len(text) or not heard or re.match(r"\s", text[len(heard)]) is not None
    )


async def test_barge_in_stops_the_voice_and_the_next_turn_starts_clean(
    tmp_path: Path, voice: tuple[str, SpeechServer]
) -> None:
    spec, server = voice
    engine = create_engine(TtsOptions(spec=spec), RATE)
    sink = NullSink(sample_rate=RATE, realtime=True)
    long = ReplaySource(write_recording(tmp_path / "long.jsonl", REPLY), speed=0)
    short = ReplaySource(write_recording(tmp_path / "short.jsonl", SHORT), speed=0)
    session = Session(Replies(long, short), engine, sink)
    tasks_before = len(asyncio.all_tasks())
    async with session:
        results: list[TurnResult] = []

        async def speak() -> None:
            results.append(await session.turn("go"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(speak)
            while sink.played_seconds < 1.0:
                await anyio.sleep(0.01)
            session.interrupt()
            at_interrupt = sink.played_seconds
        await anyio.sleep(0.3)
        # At most a 10 ms block that was already being played goes on.
        assert sink.played_seconds - at_interrupt <= 0.1
        (first,) = results
        assert first.interrupted and first.error is None
        assert 0 < len(first.spoken_text) < len(REPLY)
        assert words_prefix(first.spoken_text, REPLY), first.spoken_text
        # Nothing of the interrupted turn is left running.
        assert len(asyncio.all_tasks()) == tasks_before
        assert server.open_connections == 0 and server.early_closes >= 1
        assert first.report.tts_connection["cancelled_requests"] >= 1
        # The next turn speaks in full, from a clean start.
        results.clear()
        second = await session.turn("again")
    assert second.error is None and not second.interrupted
    assert second.spoken_text == SHORT
    assert len(asyncio.all_tasks()) == tasks_before
    assert server.open_connections == 0

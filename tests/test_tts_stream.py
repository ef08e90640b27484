"""The turn stream: piece-at-a-time engines adapted in one place (overlap, order,
errors in their place), and what was heard told from character alignment."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path

import anyio
import numpy as np
import pytest

from tests.session_helpers import write_recording
from tests.tts_helpers import run_stream
from voice_membrane.pipeline.session import Session
from voice_membrane.pipeline.turn import TurnResult, _heard_by_alignment
from voice_membrane.providers.replay import ReplaySource
from voice_membrane.sinks.null import NullSink
from voice_membrane.tts.base import Alignment, TtsError, TtsStream, Voiced
from voice_membrane.tts.piece_stream import PieceEngine
from voice_membrane.vocab.audio import AudioChunk

pytestmark = pytest.mark.anyio

RATE = 16000
CHAR_S = 0.02  # audio per character
PAUSE_S = 0.4


def tone(seconds: float, level: int) -> AudioChunk:
    return AudioChunk(np.full(round(seconds * RATE), level, dtype=np.int16), RATE)


class ScriptedEngine(PieceEngine):
    """Each piece: ``CHAR_S`` of audio per character in 4 chunks, whose samples hold
    the piece's number; piece ``slow`` waits before its audio, piece ``fail`` fails
    after its first chunk. Keeps when each piece started and ended."""

    name = "scripted"
    sample_rate = RATE

    def __init__(
        self, max_in_flight: int = 1, slow: int = -1, fail: int = -1, fail_part: int = 1
    ) -> None:
        self.max_in_flight, self.slow, self.fail = max_in_flight, slow, fail
        self.fail_part = fail_part
        self.events: list[tuple[str, str]] = []
        self.previous: list[str] = []

    async def synthesize(
        self, text: str, previous_text: str = ""
    ) -> AsyncGenerator[AudioChunk, None]:
        number = len(self.previous)
        self.previous.append(previous_text)
        self.events.append(("start", text))
        if number == self.slow:
            await anyio.sleep(0.3)
        for part in range(4):
            await anyio.sleep(0)
            if number == self.fail and part == self.fail_part:
                raise TtsError(f"service failed on piece {number}")
            yield tone(len(text) * CHAR_S / 4, number + 1)
        self.events.append(("end", text))


async def test_overlapping_pieces_come_out_in_text_order() -> None:
    engine = ScriptedEngine(max_in_flight=2, slow=0)
    pieces = ["One two three.", "Four five.", "Six."]
    voiced = await run_stream(engine, pieces)
    assert [v.piece for v in voiced] == [0] * 4 + [1] * 4 + [2] * 4
    assert [int(v.audio.samples[0]) for v in voiced] == [1] * 4 + [2] * 4 + [3] * 4
    # The second request ran while the slow first one waited: overlap, not a queue.
    assert engine.events.index(("end", pieces[1])) < engine.events.index(("end", pieces[0]))
    assert engine.previous == ["", pieces[0], pieces[0] + pieces[1]]


async def test_one_piece_at_a_time_waits_for_the_previous_piece() -> None:
    engine = ScriptedEngine(max_in_flight=1, slow=0)
    await run_stream(engine, ["One two.", "Three."])
    assert [kind for kind, _ in engine.events] == ["start", "end", "start", "end"]


async def test_an_error_comes_in_its_place_after_the_audio_before_it() -> None:
    engine = ScriptedEngine(max_in_flight=3, fail=1)
    out: list[Voiced] = []
    with pytest.raises(ExceptionGroup) as info:
        async with engine.open_stream() as stream:
            for piece in ["One two.", "Three four.", "Five."]:
                await stream.push(piece)
            await stream.end_input()
            async for voiced in stream:
                out.append(voiced)
    assert info.group_contains(TtsError, match="piece 1")
    assert [v.piece for v in out] == [0, 0, 0, 0, 1]  # all of piece 0, then 1 until it failed


async def test_a_refused_piece_is_not_billed() -> None:
    engine = ScriptedEngine(fail=1, fail_part=0)
    engine.billed = True
    pieces = ["One two.", "Three four."]
    async with engine.open_stream() as stream:
        for piece in pieces:
            await stream.push(piece)
        await stream.end_input()
        with pytest.raises(TtsError):
            async for _ in stream:
                pass
    assert stream.stats.chars_billed == len(pieces[0])


def write_reply(tmp_path: Path, text: str) -> ReplaySource:
    return ReplaySource(write_recording(tmp_path / "reply.jsonl", text), speed=0)


async def test_a_tts_error_ends_the_speech_but_keeps_the_whole_reply(tmp_path: Path) -> None:
    text = "First sentence here. Second one is here. Third one ends it."
    session = Session(write_reply(tmp_path, text), ScriptedEngine(fail=1), NullSink())
    async with session:
        result = await session.turn("go")
    assert result.error == "service failed on piece 1"
    assert result.visible_text == text  # the reply went on to its end
    assert result.reply is not None and result.reply.error is None
    assert result.spoken_text.startswith("First sentence here.")
    assert "Third" not in result.spoken_text
    pieces = result.report.tts_pieces
    assert pieces[0]["audio_seconds"] > 0 and pieces[0]["first_byte_ms"] is not None


class AlignedEngine(ScriptedEngine):
    """``ScriptedEngine`` whose chunks say which characters they voice, the way a
    streaming service does (times relative to each chunk)."""

    async def synthesize(
        self, text: str, previous_text: str = ""
    ) -> AsyncGenerator[AudioChunk, None]:
        raise AssertionError("open_stream is overridden")
        yield tone(0, 0)

    def open_stream(self) -> TtsStream:
        self.stream = _AlignedStream()
        return self.stream


class _AlignedStream:
    def __init__(self) -> None:
        from voice_membrane.tts.base import StreamStats

        self.stats = StreamStats()
        self._send, self._recv = anyio.create_memory_object_stream[Voiced | None](100)
        self._count = 0
        self.t = 0.0  # where the audio sent so far ends
        self.words: list[tuple[str, float]] = []  # each word, when its last letter ends

    async def __aenter__(self) -> _AlignedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._send.close()
        self._recv.close()

    async def push(self, text: str) -> None:
        # Chunks of words (with the space after each), as a service sends them; a
        # piece begins with a pause, so a word's place is not its share of the audio.
        for number, word in enumerate(w + " " for w in text.split()):
            pause = PAUSE_S if number == 0 else 0.0
            self.words.append((word.strip(), self.t + pause + (len(word) - 1) * CHAR_S))
            # Two chunks per word: a chunk may end inside a word.
            cut = len(word) // 2
            for part, lead in ((word[:cut], pause), (word[cut:], 0.0)):
                if not part:
                    continue
                n = len(part)
                alignment = Alignment(
                    tuple(part),
                    tuple((lead + i * CHAR_S) * 1000 for i in range(n)),
                    (CHAR_S * 1000,) * n,
                )
                self.t += lead + n * CHAR_S
                await self._send.send(Voiced(self._count, tone(lead + n * CHAR_S, 1), alignment))
        self._count += 1

    async def end_input(self) -> None:
        await self._send.send(None)

    def __aiter__(self) -> _AlignedStream:
        return self

    async def __anext__(self) -> Voiced:
        item = await self._recv.receive()
        if item is None:
            raise StopAsyncIteration
        return item


async def test_interrupted_speech_is_heard_to_the_word_from_the_alignment(
    tmp_path: Path,
) -> None:
    text = "Alpha bravo charlie delta. Echo foxtrot golf hotel india juliet kilo."
    sink = NullSink(sample_rate=RATE, realtime=True)
    engine = AlignedEngine()
    session = Session(write_reply(tmp_path, text), engine, sink)
    tasks_before = len(asyncio.all_tasks())
    async with session:
        results: list[TurnResult] = []

        async def run() -> None:
            results.append(await session.turn("go"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            while sink.played_seconds < 1.5:  # past the first piece
                await anyio.sleep(0.005)
            session.interrupt()
        played = sink.played_seconds
    (result,) = results
    assert len(asyncio.all_tasks()) == tasks_before
    # The words whose last letter had been played by then.
    heard = [word for word, end in engine.stream.words if end <= played + 1e-3]
    assert result.spoken_text == " ".join(heard)
    assert 3 <= len(heard) < len(text.split())


def test_heard_by_alignment_keeps_whole_words_only() -> None:
    chars = [(c, (i + 1) * 0.1) for i, c in enumerate("ab cd ef")]
    assert _heard_by_alignment(chars, 0.0) == ""
    assert _heard_by_alignment(chars, 0.15) == ""  # "a" of "ab" only
    assert _heard_by_alignment(chars, 0.2) == "ab"  # the space after is not yet played
    assert _heard_by_alignment(chars, 0.45) == "ab "
    assert _heard_by_alignment(chars, 0.5) == "ab cd"
    assert _heard_by_alignment(chars, 0.8) == "ab cd ef"

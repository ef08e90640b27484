"""Silero windows of many listeners scored in one model call
(pipeline/vad_batch.py): the same events as each detector alone, whatever the
chunking and the interleaving; fewer model calls than windows; a model failure
reaches every waiting listener; a served listener's windows go through it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voice_membrane.listening.push_to_talk import PushToTalk
from voice_membrane.listening.resample import StreamResampler
from voice_membrane.listening.silero import SileroVad, score_together, shared_session
from voice_membrane.listening.silero import model_path as silero_model
from voice_membrane.listening.vad import SpeechStart, VadEvent
from voice_membrane.pipeline import vad_batch
from voice_membrane.pipeline.vad_batch import VadBatcher
from voice_membrane.vocab.audio import Samples

SPEECH = Path(__file__).resolve().parent.parent / "audio_fixtures" / "speech"
CLIPS = ["questions/weather_paris.wav", "mid_pause.wav", "two_utterances.wav"]


def _clip(name: str, rate: int, seconds: float = 2.5) -> Samples:
    samples, source_rate = sf.read(SPEECH / name, dtype="int16")
    samples = np.asarray(samples[: int(seconds * source_rate)], dtype=np.int16)
    return samples if source_rate == rate else StreamResampler(source_rate, rate).feed(samples)


AUDIO = {rate: [_clip(name, rate) for name in CLIPS] for rate in (8000, 16000)}


def _plain(events: list[VadEvent]) -> list[tuple[Any, ...]]:
    """Events as comparable tuples (a start's audio as bytes)."""
    out: list[tuple[Any, ...]] = []
    for event in events:
        fields = tuple(
            value.tobytes() if isinstance(value, np.ndarray) else value
            for value in (getattr(event, f.name) for f in dataclasses.fields(event))
        )
        out.append((type(event).__name__, *fields))
    return out


def _alone(rate: int, audio: Samples, cuts: list[int]) -> list[VadEvent]:
    vad = SileroVad(sample_rate=rate)
    events: list[VadEvent] = []
    for piece in np.split(audio, cuts):
        events += vad.feed(piece)
    return events


def _cuts(data: st.DataObject, length: int) -> list[int]:
    points = data.draw(st.lists(st.integers(1, length - 1), max_size=40))
    return sorted(set(points))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_listeners_fed_together_hear_what_each_hears_alone(data: st.DataObject) -> None:
    rate = data.draw(st.sampled_from([8000, 16000]))
    clips = AUDIO[rate]
    cuts = [_cuts(data, len(audio)) for audio in clips]
    # where each listener yields to the others between its pieces
    yields = [data.draw(st.lists(st.integers(0, 2), min_size=len(c) + 1)) for c in cuts]
    batcher = VadBatcher()
    together: list[list[VadEvent]] = [[] for _ in clips]

    async def listen(index: int) -> None:
        vad = SileroVad(sample_rate=rate)
        pieces = np.split(clips[index], cuts[index])
        for piece, passes in zip(pieces, yields[index], strict=False):
            together[index].extend(await batcher.feed(vad, piece))
            for _ in range(passes):
                await anyio.sleep(0)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for index in range(len(clips)):
                tg.start_soon(listen, index)

    anyio.run(main)
    for index, audio in enumerate(clips):
        assert _plain(together[index]) == _plain(_alone(rate, audio, cuts[index]))
    # (the clips hold speech: the comparison covers starts and ends)
    assert any(isinstance(e, SpeechStart) for events in together for e in events)


class CountingSession:
    """The shared model session, counting calls and their batch sizes."""

    def __init__(self, rate: int, fail: bool = False) -> None:
        self._session = shared_session(silero_model(rate))
        self.batches: list[int] = []
        self.fail = fail

    def run(self, outputs: Any, feeds: dict[str, Any]) -> Any:
        if self.fail:
            raise RuntimeError("the model failed")
        self.batches.append(len(feeds["input"]))
        return self._session.run(outputs, feeds)


def test_windows_ready_in_one_pass_are_one_model_call() -> None:
    session = CountingSession(16000)
    vads = [SileroVad(sample_rate=16000, session=session) for _ in range(4)]
    batcher = VadBatcher()
    # 0.5 s of the question past its leading silence: 15 whole windows, each
    # scored (deep silence would not be)
    audio = AUDIO[16000][0][9 * 512 : 9 * 512 + 16000 // 2]

    async def listen(vad: SileroVad) -> None:
        for piece in np.array_split(audio, 25):  # 20 ms frames
            await batcher.feed(vad, piece)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for vad in vads:
                tg.start_soon(listen, vad)

    anyio.run(main)
    assert sum(session.batches) == 4 * 15
    assert set(session.batches) == {4}  # every window scored with the other three


def test_a_model_failure_reaches_every_waiting_listener() -> None:
    session = CountingSession(16000, fail=True)
    batcher = VadBatcher()
    failures: list[str] = []

    async def listen() -> None:
        vad = SileroVad(sample_rate=16000, session=session)
        try:
            await batcher.feed(vad, np.zeros(1024, dtype=np.int16))
        except RuntimeError as exc:
            failures.append(str(exc))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(listen)

    anyio.run(main)
    assert failures == ["the model failed"] * 3


def test_a_button_is_not_batched() -> None:
    button = PushToTalk(16000)

    async def main() -> list[VadEvent]:
        return await VadBatcher().feed(button, np.zeros(320, dtype=np.int16))

    assert anyio.run(main) == []
    assert button.samples_fed == 320


def test_batched_scores_equal_one_at_a_time() -> None:
    for rate in (8000, 16000):
        alone = [SileroVad(sample_rate=rate) for _ in AUDIO[rate]]
        together = [SileroVad(sample_rate=rate) for _ in AUDIO[rate]]
        expected = [
            vad.score(vad.stage(audio)) for vad, audio in zip(alone, AUDIO[rate], strict=True)
        ]
        staged = [(vad, vad.stage(audio)) for vad, audio in zip(together, AUDIO[rate], strict=True)]
        got = score_together(staged)
        assert got == expected  # bit for bit on this onnxruntime
        for vad, probabilities in zip(together, got, strict=True):
            vad.judge(probabilities)


def test_stage_and_judge_come_in_pairs() -> None:
    vad = SileroVad(sample_rate=16000)
    with pytest.raises(RuntimeError, match="without a stage"):
        vad.judge([])
    windows = vad.stage(np.zeros(1024, dtype=np.int16))
    with pytest.raises(RuntimeError, match="twice"):
        vad.stage(np.zeros(10, dtype=np.int16))
    with pytest.raises(ValueError, match="1 scores for 2 staged windows"):
        vad.judge([0.0])
    assert len(windows) == 2


def test_a_served_listener_scores_through_the_loop_batcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pocketsphinx")
    from serve_helpers import start
    from serve_voice_helpers import listening_pipelines, silence, speak
    from websockets.asyncio.client import connect

    from voice_membrane.server import Server

    calls: list[int] = []

    def counting(items: Any) -> Any:
        calls.append(len(items))
        return score_together(items)

    monkeypatch.setattr(vad_batch, "score_together", counting)
    voice_in = {"encoding": "pcm16", "sample_rate": 16000, "frame_ms": 20}

    async def main() -> None:
        server = Server(listening_pipelines(tmp_path), port=0, log=lambda *a, **k: None)
        async with server, connect(server.ws_url) as ws:
            await start(ws, pipeline="voice", input_audio=voice_in)
            await speak(ws, silence(0.5))

    anyio.run(main)
    # 0.5 s of zeros, 15 windows: the first 8 scored through the batcher, the
    # deep silence after them not at all
    assert sum(calls) == 8

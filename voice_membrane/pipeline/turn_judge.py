"""The end-of-turn model at a listener's side: the audio it judges, and the judging.

The listener keeps the last ``KEPT_S`` of its input here. At a ``JudgeTurn``
the utterance's audio up to the sample asked (its last ``MODEL_S``, 16 kHz) is
given to the model in a worker thread, and the listener waits for the answer
before it takes its next input: the answer is dated at the sample it was asked
at, so a file fed faster than real time is judged as a microphone is, and a
live listener falls behind by the model's time (~115 ms of one core, docs/listening.md)
and catches up, its queued frames heard together.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import anyio
import numpy as np
import numpy.typing as npt

from ..listening.decisions import JudgeTurn
from ..listening.turn_model import TurnModel
from ..sources.base import Frame
from ..vocab.upsample import upsample

MODEL_RATE = 16_000
MODEL_S = 8.0  # what the model hears: the last 8 s
KEPT_S = MODEL_S + 1.0  # (the ask comes the detector's confirmation after the speech)


@dataclass(frozen=True, slots=True)
class Judgement:
    """The model's answer (None: it failed, ``error`` says how) and its own time."""

    probability: float | None
    model_ms: float
    error: str | None = None


class TurnJudge:
    def __init__(self, model: TurnModel, sample_rate: int) -> None:
        if MODEL_RATE % sample_rate:
            raise ValueError(f"the turn model hears 16 kHz: {sample_rate} Hz does not divide it")
        self._model = model
        self.sample_rate = sample_rate
        self._frames: deque[Frame] = deque()
        self._kept = 0  # samples in _frames
        self._limit = round(KEPT_S * sample_rate)

    def note(self, frame: Frame) -> None:
        """A frame of the input, in order."""
        if self._frames and frame.position != self._frames[-1].end:
            self._frames.clear()  # (a gap: what came before is not this audio's past)
            self._kept = 0
        self._frames.append(frame)
        self._kept += len(frame.samples)
        while self._frames and self._kept - len(self._frames[0].samples) >= self._limit:
            self._kept -= len(self._frames.popleft().samples)

    def audio(self, start: int, upto: int) -> npt.NDArray[np.float32]:
        """The input from sample ``start`` (at most ``MODEL_S`` before ``upto``)
        to ``upto``, as the model hears it."""
        start = max(start, upto - round(MODEL_S * self.sample_rate))
        parts = [
            f.samples[max(0, start - f.position) : max(0, upto - f.position)]
            for f in self._frames
            if f.end > start and f.position < upto
        ]
        pcm = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
        pcm = upsample(pcm, MODEL_RATE // self.sample_rate)
        return (pcm.astype(np.float32) / 32768.0).astype(np.float32)

    async def judge(self, ask: JudgeTurn) -> Judgement:
        samples = self.audio(ask.start, ask.at_sample)
        began = time.perf_counter()
        try:
            probability = await anyio.to_thread.run_sync(self._model.done_probability, samples)
        except Exception as exc:  # (a broken model must not end listening: silence decides)
            ms = (time.perf_counter() - began) * 1000
            return Judgement(None, ms, f"{type(exc).__name__}: {exc}")
        return Judgement(float(probability), (time.perf_counter() - began) * 1000)

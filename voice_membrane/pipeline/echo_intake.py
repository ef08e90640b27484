"""The echo canceller at the pipeline's edges: the reply's audio as the sink
plays it (``played``, from whatever thread plays it: a sound card's callback)
and the microphone's frames, cleaned before the listener hears them
(``frames``). The canceller itself is sans-I/O (``listening/echo_canceller.py``);
this is where the two streams meet it, in the listener's task.

Which pipelines cancel: ``[sink] echo_canceller`` (``cancels_echo``)."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from typing import Literal

import numpy as np

from ..listening.aec_webrtc import webrtc_canceller
from ..listening.echo_canceller import ENGINE_RATES, EchoCanceller
from ..sources.base import Frame
from ..vocab.audio import Samples
from .config import ConfigError, PipelineConfig

# the far audio waiting for the next frame, at most (a sound card's 10 ms callbacks)
_QUEUED = 1000
Where = Literal["speaker", "call", "browser", "recording"]


def cancels_echo(config: PipelineConfig, where: Where, rate: int) -> bool:
    """Whether the listener's input is echo-cancelled here. ``auto``: for a
    microphone beside the speaker (``run --listen``); ``webrtc``: phone calls
    too (off by default: most phones cancel their own echo, and until the
    canceller has found that none comes back, ~1 s into the first answer, it
    ducks the caller's words spoken over it, docs/listening.md); ``none``:
    never. Never for a browser (its getUserMedia cancels its own) or a
    recording (no echo), nor at a rate WebRTC's module does not run at."""
    mode = config.sink.echo_canceller
    if mode == "none" or rate not in ENGINE_RATES:
        return False
    return where == "speaker" or (where == "call" and mode == "webrtc")


def echo_intake_for(config: PipelineConfig, where: Where, rate: int) -> EchoIntake | None:
    """The canceller for a listener at ``rate`` (None: this input is not
    cancelled). Its package missing: ``auto`` goes without (the level judge
    guards against the echo, ``[endpoint] echo``), ``webrtc`` is a
    ``ConfigError`` in one line."""
    if not cancels_echo(config, where, rate):
        return None
    try:
        return EchoIntake(webrtc_canceller(rate))
    except ImportError as exc:
        if config.sink.echo_canceller == "auto":
            return None
        raise ConfigError(f"sink.echo_canceller: {exc}") from None


class EchoIntake:
    def __init__(self, canceller: EchoCanceller) -> None:
        self.canceller = canceller
        # (deque's append and popleft are atomic: the sink's thread and the
        # listener's task share it with no lock)
        self._played: deque[tuple[Samples, int, int, bool]] = deque(maxlen=_QUEUED)
        self._position = 0

    def played(self, samples: Samples, rate: int, at_ns: int) -> None:
        """A sound card's block: ``samples`` begin to be heard at ``at_ns``
        (``perf_counter_ns``, from its callback: late when the callback ran
        late); silence too, so the reference is whole. Any thread."""
        self._played.append((np.array(samples, dtype=np.int16), rate, at_ns, True))

    def sent(self, samples: Samples, rate: int, at_ns: int) -> None:
        """Audio sent to be played at ``at_ns`` exactly (a call's send clock)."""
        self._played.append((np.array(samples, dtype=np.int16), rate, at_ns, False))

    def clean(self, frame: Frame) -> Frame:
        """``frame`` with the echo of what was played taken out (positions
        renumbered: the canceller works in whole 10 ms blocks)."""
        while self._played:
            samples, rate, at_ns, steady = self._played.popleft()
            self.canceller.far(samples, rate, at_ns, steady=steady)
        samples = self.canceller.near(frame.samples, frame.captured_ns)
        out = Frame(samples, frame.sample_rate, self._position, frame.captured_ns)
        self._position += len(samples)
        return out

    async def frames(self, frames: AsyncIterator[Frame]) -> AsyncIterator[Frame]:
        async for frame in frames:
            cleaned = self.clean(frame)
            if len(cleaned.samples):  # (an empty frame is the listener's end of input)
                yield cleaned

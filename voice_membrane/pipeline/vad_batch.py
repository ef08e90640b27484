"""Silero windows of many listeners scored in one model call.

A served process runs one listener per caller, each scoring a 32 ms window
about 31 times a second. onnxruntime's cost per call is mostly fixed: a batch
of 8 windows costs about 0.6 of 8 single calls at 16 kHz and 0.4 at 8 kHz
(docs/listening.md). The listeners whose frames complete windows in one pass
of the event loop wait one pass and are scored together; a lone listener
waits one pass and is scored alone. The detectors stay sans-I/O: ``stage``
before the wait, ``judge`` after it (listening/front.py).
"""

from __future__ import annotations

import asyncio
import weakref

import anyio

from ..listening.front import SpeechFront
from ..listening.silero import SileroVad, score_together
from ..listening.vad import VadEvent
from ..vocab.audio import Samples

_Waiting = tuple[SileroVad, list[Samples], "asyncio.Future[list[float]]"]


class VadBatcher:
    """``await feed(front, samples)`` as ``front.feed(samples)``, with the
    windows of every listener feeding in the same pass scored together."""

    def __init__(self) -> None:
        self._waiting: list[_Waiting] = []

    async def feed(self, front: SpeechFront, samples: Samples) -> list[VadEvent]:
        if not isinstance(front, SileroVad):  # a button, another engine: no model batch
            return front.feed(samples)
        windows = front.stage(samples)
        if not windows:
            return front.judge([])
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[float]] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._score_waiting)  # after this pass's other listeners
        self._waiting.append((front, windows, future))
        # A staged detector must be judged (its state is half-fed until then);
        # the wait is one pass of the loop.
        with anyio.CancelScope(shield=True):
            scores = await future
        return front.judge(scores)

    def _score_waiting(self) -> None:
        waiting, self._waiting = self._waiting, []
        try:
            scores = score_together([(front, windows) for front, windows, _ in waiting])
        except Exception as exc:  # the model's failure is every waiting listener's
            for _, _, future in waiting:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, _, future), probabilities in zip(waiting, scores, strict=True):
            if not future.done():  # (cancelled from outside anyio's scopes)
                future.set_result(probabilities)


_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, VadBatcher] = (
    weakref.WeakKeyDictionary()
)


def loop_batcher() -> VadBatcher:
    """The running event loop's batcher (one per served process's loop)."""
    loop = asyncio.get_running_loop()
    batcher = _batchers.get(loop)
    if batcher is None:
        batcher = _batchers[loop] = VadBatcher()
    return batcher

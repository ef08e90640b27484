"""How frames reach a listener's queue: from a task reading a source, or put
straight in by code that is not a task (``FrameInlet``: a socket's receive
handler); the marker their end is; and whether they come at the audio's own
pace (``SourcePace``: live, or a file read as fast as it goes)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import anyio
import numpy as np

from ..sources.base import Frame
from ..vocab.audio import Samples
from .inbox import Inbox
from .stt_streams import ListenerInput

_NO_SAMPLES: Samples = np.zeros(0, dtype=np.int16)


def end_of_input(rate: int, end: int) -> Frame:
    """The marker a listener's input ends with: a frame of no samples."""
    return Frame(_NO_SAMPLES, rate, end, time.perf_counter_ns())


class FrameInlet:
    """Frames put by code that is not a task (a socket's receive handler)
    straight into a listener's queue, with no task between them: a served
    session's frame is taken by the listener in the next pass of the loop, not
    handed through a stream and a pump first. ``put`` never waits: a listener
    whose queue is full (far behind real time) loses the frame, counted in
    ``dropped``; ``close`` ends the input after the frames put before it."""

    def __init__(self, backlog: int) -> None:
        self._backlog = backlog  # frames held before the listener runs
        self._early: list[Frame] = []
        self._inbox: Inbox[ListenerInput] | None = None
        self._closed = anyio.Event()
        self._end: tuple[int, int] | None = None  # (rate, position) past the last frame
        self.dropped = 0

    def put(self, frame: Frame) -> None:
        if self._closed.is_set():
            return
        self._end = (frame.sample_rate, frame.end)
        if self._inbox is None:
            if len(self._early) < self._backlog:
                self._early.append(frame)
            else:
                self.dropped += 1
            return
        try:
            self._inbox.put_nowait(frame)
        except anyio.WouldBlock:
            self.dropped += 1
        except anyio.ClosedResourceError:
            pass  # the listener is gone: the conversation is over

    def close(self) -> None:
        self._closed.set()

    async def deliver_to(self, inbox: Inbox[ListenerInput], rate: int) -> None:
        """The listener's side: the frames put so far, then each as it is put,
        then the end of input once closed."""
        while self._early:  # (more may be put while these are sent)
            early, self._early = self._early, []
            for frame in early:
                await inbox.put(frame)
        self._inbox = inbox
        try:
            await self._closed.wait()
        finally:
            self._inbox = None
        rate, end = self._end or (rate, 0)
        await inbox.put(end_of_input(rate, end))


PACE_SPAN_S = 0.2  # the audio over which a source's pace is judged


@dataclass(slots=True)
class SourcePace:
    """Whether a source's frames come at the audio's own pace (a microphone, a
    client streaming live) rather than ahead of it (a file read as fast as it
    goes): judged from their capture times over each ``PACE_SPAN_S`` of audio,
    so two frames that arrive together (one socket read) change nothing."""

    live: bool = False
    _span_from: tuple[int, int] | None = None  # (end, captured_ns) where the span began

    def note(self, frame: Frame) -> None:
        if self._span_from is None:
            self._span_from = (frame.end, frame.captured_ns)
            return
        end, captured_ns = self._span_from
        audio_ns = (frame.end - end) * 1e9 / frame.sample_rate
        if audio_ns >= PACE_SPAN_S * 1e9:
            self.live = frame.captured_ns - captured_ns >= audio_ns / 2
            self._span_from = (frame.end, frame.captured_ns)

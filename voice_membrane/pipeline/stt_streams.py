"""A listener's speech-to-text streams: one per stretch of speech, opened at
the detector's start, pushed the audio while the user speaks, asked to settle
at the end, and read by a task of their own that posts what comes — each
transcript, then the stream's end (with its error, if it failed) — to the
listener's queue, in order with its frames.

A stream that fails — refused when opened (429 after the retry, 401, the
service unreachable), or later — is marked failed: its utterance makes no turn,
and its end carries the ``SttError`` for the listener to report. The next
stretch of speech opens a new stream, so listening goes on through an outage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from anyio.abc import TaskGroup, TaskStatus

from ..sources.base import Frame
from ..stt.base import SttEngine, SttError, SttStream, tell_paused
from ..vocab.audio import Samples
from ..vocab.transcripts import Transcript
from .inbox import Inbox


@dataclass(slots=True)
class StreamTranscript:
    """A transcript of stream ``stream``, taken at ``at_ns`` (``perf_counter_ns``)."""

    stream: int
    transcript: Transcript
    at_ns: int


@dataclass(slots=True)
class StreamEnded:
    """Stream ``stream`` gave its last transcript, or failed with ``error``."""

    stream: int
    error: SttError | None
    at_ns: int


# What a listener's queue holds: frames, what the streams' readers post, and
# (a bool) the assistant's audio starting or stopping.
ListenerInput = Frame | StreamTranscript | StreamEnded | bool


class UtteranceStreams:
    """The streams of one listener over ``stt``; their readers post to ``inbox``."""

    def __init__(self, stt: SttEngine, inbox: Inbox[ListenerInput]) -> None:
        self.stt, self._inbox = stt, inbox
        self._open: SttStream | None = None  # the stream audio is pushed to
        self._paused = False  # the open stream was told the user paused
        self.current = 0  # the number of the last stream opened
        self.running = 0  # streams whose readers have not posted their end
        self._failed: set[int] = set()
        self._from_s: dict[int, float] = {}  # where each stream's audio begins in the input

    @property
    def is_open(self) -> bool:
        return self._open is not None

    def failed(self, stream: int | None = None) -> bool:
        """Whether stream ``stream`` (the last opened by default) failed."""
        return (self.current if stream is None else stream) in self._failed

    def from_s(self, stream: int) -> float:
        return self._from_s.get(stream, 0.0)

    async def open(self, tg: TaskGroup, from_s: float) -> None:
        """A new stream, its reader started in ``tg`` (the last one is finalized
        first: speech resumed before it settled). Refused, it is a failed stream
        with nothing to push to; its reader posts the error."""
        if self._open is not None:
            await self.finalize()
        self.current += 1
        self.running += 1
        self._paused = False
        self._from_s[self.current] = from_s
        self._open = await tg.start(self._read, self.stt.stream(), self.current)
        if self._open is None:
            self._failed.add(self.current)

    async def _read(
        self, stream: SttStream, number: int, *, task_status: TaskStatus[SttStream | None]
    ) -> None:
        inbox = self._inbox
        error: SttError | None = None
        started = False
        try:
            async with stream:
                task_status.started(stream)
                started = True
                async for transcript in stream.transcripts():
                    await inbox.put(StreamTranscript(number, transcript, time.perf_counter_ns()))
        except SttError as exc:
            error = exc
        if not started:  # refused when opened: the listener goes on without it
            task_status.started(None)
        await inbox.put(StreamEnded(number, error, time.perf_counter_ns()))

    async def push(self, samples: Samples) -> None:
        stream = self._open
        if stream is None or len(samples) == 0:
            return
        try:
            await stream.push(samples)
        except SttError:
            self._failed.add(self.current)  # its reader reports the error
            self._open = None

    async def hint_pause(self, pausing: bool) -> None:
        """Tell the open stream when the detector hears the user stop (``True``)
        or go on before the stop was confirmed (``False``), once per change:
        an engine may start settling at the pause (``SttStream.speech_paused``)."""
        stream = self._open
        if stream is None or pausing == self._paused:
            return
        self._paused = pausing
        try:
            await tell_paused(stream, pausing)
        except SttError:
            self._failed.add(self.current)  # its reader reports the error
            self._open = None

    async def finalize(self) -> None:
        """No more audio for the open stream: it settles (its reader goes on)."""
        stream, self._open = self._open, None
        if stream is not None:
            try:
                await stream.finalize()
            except SttError:
                self._failed.add(self.current)

    def ended(self, item: StreamEnded) -> None:
        """Its reader's last post was taken."""
        self.running -= 1
        self._from_s.pop(item.stream, None)
        if item.error is not None:
            self._failed.add(item.stream)

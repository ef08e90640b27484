"""The listening half: the user's voice in, user turns and barge-in out.

Audio frames (``sources/``) go to the voice activity detector (``listening/``);
a detected start opens a speech-to-text stream (``stt/``) given the detector's
pre-roll first, so the first word is not clipped; the frames that follow are
pushed while the user speaks, and the stream is asked to settle when the
detector says the speech stopped. The endpointer (``listening/endpointer.py``,
sans-I/O) hears all of it — detector events, transcripts, the assistant's
playout — and decides: the user's turn is over (``UserTurn``), or speech over
the assistant pauses it, resumes it, or interrupts it (``BargeIn``). Before a
turn is decided it may say the user has probably finished (``TentativeTurn``):
a reply may start, held unheard, until the ``UserTurn`` (``tentative`` set: the
same words) or a ``TentativeDropped``; every tentative turn gets one or the other.

Everything the endpointer is told happens in one task, in order, dated by
samples of input (never the wall clock), so a file fed faster than real time
decides exactly as a live microphone. Wall-clock stamps (when speech ended,
when the final transcript came) are kept beside, for voice-to-voice latency:
a sample's time is its frame's capture time less the samples after it.

An STT failure is never a turn from half an utterance: the utterance it hit is
dropped (the user is told, ``ListenError``) and listening goes on.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
import numpy as np
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from ..listening.decisions import (
    Decision,
    EndOfTurn,
    FinalizeStt,
    Interrupt,
    LateTranscript,
    PausePlayout,
    ResumePlayout,
    TentativeCancelled,
    TentativeEnd,
)
from ..listening.endpointer import Endpointer
from ..listening.front import SpeechFront
from ..listening.vad import SpeechEnd, SpeechStart, samples_after
from ..sources.base import Frame
from ..stt.base import SttEngine, SttError, SttStream
from ..vocab.audio import Samples
from ..vocab.transcripts import Transcript
from .inbox import Inbox
from .vad_batch import VadBatcher


@dataclass(frozen=True, slots=True)
class Heard:
    """A transcript as it comes: a partial (shown dimmed) or a final.
    ``stream_from_s``: where its stream's audio begins in the input (its
    times are from there)."""

    transcript: Transcript
    stream_from_s: float = 0.0


@dataclass(frozen=True, slots=True)
class UserTurn:
    """The user is done: ``text`` starts a turn. Wall-clock stamps
    (``time.perf_counter_ns``): ``speech_end_ns`` when their speech stopped,
    ``final_ns`` when the last final transcript came, ``decided_ns`` when the
    endpointer ended the turn. ``reason``: see ``EndOfTurn`` (or ``late``: a
    final that came after its utterance had closed empty; ``tentative``: a
    ``TentativeTurn``'s). ``tentative``: the words are the pending
    ``TentativeTurn``'s (a reply held for it stands)."""

    text: str
    reason: str
    speech_start_ns: int | None
    speech_end_ns: int
    final_ns: int | None
    decided_ns: int
    tentative: bool = False


@dataclass(frozen=True, slots=True)
class TentativeTurn:
    """The user has probably finished (``TentativeEnd``): ``turn`` may be answered
    now if its audio is held until the ``UserTurn`` with ``tentative`` set."""

    turn: UserTurn


@dataclass(frozen=True, slots=True)
class TentativeDropped:
    """The pending ``TentativeTurn`` is not the user's turn: throw its reply away."""


@dataclass(frozen=True, slots=True)
class BargeIn:
    """Speech over the assistant: pause its playout, resume it, or interrupt
    the reply (``Interrupt.text``: what interrupted it)."""

    decision: PausePlayout | ResumePlayout | Interrupt


@dataclass(frozen=True, slots=True)
class SpeechBegan:
    """The detector heard speech start ``at_s`` seconds into the input."""

    at_s: float


@dataclass(frozen=True, slots=True)
class SpeechEnded:
    """The detector heard speech stop ``at_s`` seconds into the input."""

    at_s: float


@dataclass(frozen=True, slots=True)
class ListenError:
    """Listening hit a fault (an STT error): the utterance is dropped, one line."""

    message: str


ListenItem = (
    Heard
    | SpeechBegan
    | SpeechEnded
    | UserTurn
    | TentativeTurn
    | TentativeDropped
    | BargeIn
    | ListenError
)


@dataclass(slots=True)
class _Transcript:
    stream: int
    transcript: Transcript
    at_ns: int


@dataclass(slots=True)
class _StreamEnded:
    stream: int
    error: SttError | None
    at_ns: int


_Input = Frame | _Transcript | _StreamEnded | bool  # bool: the assistant speaking or not
_NO_SAMPLES: Samples = np.zeros(0, dtype=np.int16)
# Frames queued behind the one taken (a listener behind real time: an overloaded
# process) are heard together, up to this much audio: the detector and the
# endpointer decide by the audio's samples whatever its chunking, and the
# per-frame costs (a pass of the loop, a push to the STT) are paid once.
MERGE_QUEUED_S = 0.1


def _end_of_input(rate: int, end: int) -> Frame:
    """The marker a listener's input ends with: a frame of no samples."""
    return Frame(_NO_SAMPLES, rate, end, time.perf_counter_ns())


BACKLOG_FRAMES = 256  # frames waiting for a listener, by default


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
        self._inbox: Inbox[_Input] | None = None
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

    async def deliver_to(self, inbox: Inbox[_Input], rate: int) -> None:
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
        await inbox.put(_end_of_input(rate, end))


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


@dataclass(slots=True)
class _Times:
    """Wall-clock times of the utterance being heard (for voice-to-voice)."""

    speech_start_ns: int | None = None
    speech_end_ns: int | None = None
    final_ns: int | None = None


@dataclass
class Listener:
    """Run with ``run(frames, out)``; tell it when the assistant's audio plays
    with ``assistant_speaking``."""

    vad: SpeechFront
    stt: SttEngine
    endpointer: Endpointer
    # scores the detector's windows with other listeners' (a served process)
    vad_batch: VadBatcher | None = None
    # frames waiting for the listener at most (a served session's: what its
    # client may send at once, in its shortest frames)
    backlog: int = BACKLOG_FRAMES
    _inbox: Inbox[_Input] = field(init=False)
    _open: SttStream | None = field(default=None, init=False)
    _open_id: int = field(default=0, init=False)
    _failed: set[int] = field(default_factory=set, init=False)
    _stream_from: dict[int, float] = field(default_factory=dict, init=False)  # by stream
    _running: int = field(default=0, init=False)  # streams whose transcripts are still read
    _times: _Times = field(default_factory=_Times, init=False)
    _last_frame: Frame | None = field(default=None, init=False)
    _last_arrival_ns: int = field(default=0, init=False)  # when it was taken
    _pace: SourcePace = field(default_factory=SourcePace, init=False)
    _tentative: bool = field(default=False, init=False)  # a TentativeTurn awaits its outcome
    _next: _Input | None = field(default=None, init=False)  # taken while merging frames

    def __post_init__(self) -> None:
        if self.vad.sample_rate != self.stt.sample_rate:
            raise ValueError(
                f"the detector takes {self.vad.sample_rate} Hz, {self.stt.name} "
                f"{self.stt.sample_rate} Hz: open the source at the STT's rate"
            )
        self._inbox = Inbox[_Input](self.backlog)

    def assistant_speaking(self, speaking: bool) -> None:
        """The assistant's audio started or stopped playing (echo, barge-in)."""
        # (After the input ended nobody listens: the news has nowhere to go.)
        # (Never refused for room: the endpointer must hear every change.)
        with contextlib.suppress(anyio.ClosedResourceError):
            self._inbox.put_nowait(speaking, bounded=False)

    async def run(
        self, frames: AsyncIterator[Frame] | FrameInlet, out: MemoryObjectSendStream[ListenItem]
    ) -> None:
        """Listen until the frames end (then settle what was heard and return)."""
        inbox = self._inbox
        async with anyio.create_task_group() as tg, out:
            if isinstance(frames, FrameInlet):
                tg.start_soon(frames.deliver_to, inbox, self.vad.sample_rate)
            else:
                tg.start_soon(self._pump, frames, inbox)
            try:
                while True:
                    deadline = self.endpointer.next_deadline()
                    item = await self._receive(deadline)
                    if item is None:  # the deadline's audio is due and nothing came first
                        assert deadline is not None
                        decisions = self.endpointer.advance(deadline)
                    elif isinstance(item, Frame):
                        if len(item.samples) == 0:
                            break  # the end of input
                        decisions = await self._frame(item, tg, out)
                    else:
                        await self._tell(item, out)
                        decisions = self._take(item)
                    for decision in decisions:
                        await self._decide(decision, out)
                # still open: the STT streams' readers send what they settle here
                await self._settle(out)
            finally:
                inbox.close()
            tg.cancel_scope.cancel()

    async def _receive(self, deadline: int | None) -> _Input | None:
        """The next input, or None when the endpointer's ``deadline`` (a sample)
        came first: when that sample is due by the last frame's clock (at once
        if it was due already). What is queued is taken first; a source ahead of
        the clock (a file read as fast as it goes, made-up capture times) decides
        by its frames alone."""
        inbox = self._inbox
        queued, self._next = self._next, None
        if queued is None and len(inbox):
            queued = inbox.take_nowait()
        if queued is not None:
            return self._merged(queued) if isinstance(queued, Frame) else queued
        frame = self._last_frame
        if deadline is None or frame is None:
            return await inbox.take()
        due_ns = frame.captured_ns + round((deadline - frame.end) * 1e9 / frame.sample_rate)
        if due_ns <= self._last_arrival_ns and not self._pace.live:
            return await inbox.take()  # no clock to go by: the next frame decides
        with anyio.move_on_after((due_ns - time.perf_counter_ns()) / 1e9):
            return await inbox.take()
        return None

    def _merged(self, frame: Frame) -> Frame:
        """``frame`` and the frames queued right behind it (``MERGE_QUEUED_S``), as
        one; whatever else comes first is kept for the next ``_receive``."""
        if len(frame.samples) == 0:
            return frame  # the end of input
        parts, size = [frame], len(frame.samples)
        limit = MERGE_QUEUED_S * frame.sample_rate
        while size < limit:
            if not len(self._inbox):
                break
            item = self._inbox.take_nowait()
            last = parts[-1]
            if (
                not isinstance(item, Frame)
                or len(item.samples) == 0
                or item.sample_rate != last.sample_rate
                or item.position != last.end
            ):
                self._next = item
                break
            parts.append(item)
            size += len(item.samples)
        if len(parts) == 1:
            return frame
        samples = np.concatenate([part.samples for part in parts])
        return Frame(samples, frame.sample_rate, frame.position, parts[-1].captured_ns)

    async def _pump(self, frames: AsyncIterator[Frame], inbox: Inbox[_Input]) -> None:
        last: Frame | None = None
        async for frame in frames:
            last = frame
            await inbox.put(frame)
        end = 0 if last is None else last.end
        await inbox.put(_end_of_input(self.vad.sample_rate, end))

    def _take(self, item: _Transcript | _StreamEnded | bool) -> list[Decision]:
        endpointer = self.endpointer
        now = self.vad.samples_fed
        if isinstance(item, bool):
            return endpointer.assistant_speaking(item, now)
        if isinstance(item, _Transcript):
            if item.stream in self._failed:
                return []
            if item.transcript.final and item.transcript.text.strip():
                self._times.final_ns = item.at_ns
            return endpointer.transcript(item.transcript, now)
        if isinstance(item, _StreamEnded):
            self._running -= 1
            self._stream_from.pop(item.stream, None)
            if item.error is not None:
                self._failed.add(item.stream)
                return []
            return endpointer.transcripts_done(now)

    async def _frame(
        self, frame: Frame, tg: TaskGroup, out: MemoryObjectSendStream[ListenItem]
    ) -> list[Decision]:
        self._last_frame, self._last_arrival_ns = frame, time.perf_counter_ns()
        self._pace.note(frame)
        decisions: list[Decision] = []
        pushed = False
        if self.vad_batch is None:
            events = self.vad.feed(frame.samples)
        else:
            events = await self.vad_batch.feed(self.vad, frame.samples)
        for event in events:
            if isinstance(event, SpeechStart):
                await out.send(SpeechBegan(event.at_sample / frame.sample_rate))
                self._times = _Times(speech_start_ns=_sample_ns(frame, event.at_sample))
                await self._open_stream(tg)
                self._stream_from[self._open_id] = event.audio_from / frame.sample_rate
                if self._open is not None:
                    await self._push(event.audio)
                    await self._push(samples_after(frame.samples, frame.end, event.confirmed_at))
                    pushed = True
            elif isinstance(event, SpeechEnd):
                await out.send(SpeechEnded(event.at_sample / frame.sample_rate))
                self._times.speech_end_ns = _sample_ns(frame, event.at_sample)
            decisions += self.endpointer.vad(event)
        if self._open is not None and not pushed:
            await self._push(frame.samples)
        return decisions + self.endpointer.advance(self.vad.samples_fed)

    async def _open_stream(self, tg: TaskGroup) -> None:
        if self._open is not None:  # speech resumed before the last one settled
            await self._finalize()
        self._open_id += 1
        self._running += 1
        self._open = await tg.start(self._read, self.stt.stream(), self._open_id)

    async def _read(
        self, stream: SttStream, number: int, *, task_status: TaskStatus[SttStream]
    ) -> None:
        inbox = self._inbox
        error: SttError | None = None
        try:
            async with stream:
                task_status.started(stream)
                async for transcript in stream.transcripts():
                    await inbox.put(_Transcript(number, transcript, time.perf_counter_ns()))
        except SttError as exc:
            error = exc
        await inbox.put(_StreamEnded(number, error, time.perf_counter_ns()))

    async def _push(self, samples: Samples) -> None:
        stream = self._open
        if stream is None or len(samples) == 0:
            return
        try:
            await stream.push(samples)
        except SttError:
            self._failed.add(self._open_id)  # its reader reports the error
            self._open = None

    async def _finalize(self) -> None:
        stream, self._open = self._open, None
        if stream is not None:
            try:
                await stream.finalize()
            except SttError:
                self._failed.add(self._open_id)

    async def _decide(self, decision: Decision, out: MemoryObjectSendStream[ListenItem]) -> None:
        if isinstance(decision, FinalizeStt):
            await self._finalize()
        elif isinstance(decision, TentativeEnd):
            if self._open_id not in self._failed and not self._tentative:
                self._tentative = True
                await out.send(TentativeTurn(self._user_turn(decision.text, "tentative")))
        elif isinstance(decision, TentativeCancelled):
            await self._drop_tentative(out)
        elif isinstance(decision, EndOfTurn):
            if self._open_id in self._failed or not decision.text.strip():
                await self._drop_tentative(out)
                return  # (said when the stream failed): never a turn from half of it
            tentative = self._tentative and decision.tentative
            if tentative:
                self._tentative = False
            else:  # other words: the held reply was for something the user did not say
                await self._drop_tentative(out)
            await out.send(self._user_turn(decision.text, decision.reason, tentative))
        elif isinstance(decision, LateTranscript):
            if not decision.after_turn and decision.text.strip():
                await out.send(self._user_turn(decision.text, "late"))
        else:
            await out.send(BargeIn(decision))

    async def _tell(
        self, item: _Transcript | _StreamEnded | bool, out: MemoryObjectSendStream[ListenItem]
    ) -> None:
        """What the user should see as it happens: transcripts, and a failed stream."""
        if isinstance(item, _Transcript) and item.stream not in self._failed:
            await out.send(Heard(item.transcript, self._stream_from.get(item.stream, 0.0)))
        elif isinstance(item, _StreamEnded) and item.error is not None:
            await out.send(
                ListenError(
                    f"speech to text failed ({item.error}): what was said is dropped, say it again"
                )
            )

    async def _drop_tentative(self, out: MemoryObjectSendStream[ListenItem]) -> None:
        if self._tentative:
            self._tentative = False
            await out.send(TentativeDropped())

    def _user_turn(self, text: str, reason: str, tentative: bool = False) -> UserTurn:
        times, now = self._times, time.perf_counter_ns()
        return UserTurn(
            text.strip(),
            reason,
            times.speech_start_ns,
            times.speech_end_ns if times.speech_end_ns is not None else now,
            times.final_ns,
            now,
            tentative,
        )

    async def _settle(self, out: MemoryObjectSendStream[ListenItem]) -> None:
        """The input ended: close the speech, let the STT settle, and give the
        endpointer the time its timers need (in samples: the input stopped)."""
        frame = self._last_frame
        for event in self.vad.flush():
            if isinstance(event, SpeechEnd) and frame is not None:
                await out.send(SpeechEnded(event.at_sample / frame.sample_rate))
                self._times.speech_end_ns = _sample_ns(frame, event.at_sample)
            for decision in self.endpointer.vad(event):
                await self._decide(decision, out)
        await self._finalize()
        while self._running > 0:
            item = await self._inbox.take()
            if not isinstance(item, Frame):  # (none come after the end)
                await self._tell(item, out)
                for decision in self._take(item):
                    await self._decide(decision, out)
        end = self.vad.samples_fed + round(
            self.endpointer.settings.max_delay_s * self.vad.sample_rate
        )
        for decision in self.endpointer.advance(end):
            await self._decide(decision, out)
        await self._drop_tentative(out)  # (the endpointer decides every one; belt and braces)


def _sample_ns(frame: Frame, at_sample: int) -> int:
    """When sample ``at_sample`` was captured: the frame's time less the samples after it."""
    after = max(0, frame.end - at_sample)
    return frame.captured_ns - round(after * 1e9 / frame.sample_rate)

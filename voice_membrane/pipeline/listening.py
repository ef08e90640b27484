"""The listening half: the user's voice in, user turns and barge-in out.

Audio frames (``sources/``) go to the voice activity detector (``listening/``);
a detected start opens a speech-to-text stream (``stt/``, ``stt_streams.py``)
given the detector's pre-roll first, so the first word is not clipped; the
frames that follow are pushed while the user speaks, and the stream is asked to
settle when the detector says the speech stopped. The endpointer
(``listening/endpointer.py``, sans-I/O) hears all of it — detector events,
transcripts, the assistant's playout — and decides: the user's turn is over
(``UserTurn``), or speech over the assistant pauses it, resumes it, or
interrupts it (``BargeIn``). Before a turn is decided it may say the user has
probably finished (``TentativeTurn``): a reply may start, held unheard, until
the ``UserTurn`` (``tentative`` set: the same words) or a ``TentativeDropped``;
every tentative turn gets one or the other. What comes out is ``listen_items``';
how frames come in, ``frame_intake``'s.

Everything the endpointer is told happens in one task, in order, dated by
samples of input (never the wall clock), so a file fed faster than real time
decides exactly as a live microphone. Wall-clock stamps (when speech ended,
when the final transcript came) are kept beside, for voice-to-voice latency:
a sample's time is its frame's capture time less the samples after it.

An STT failure is never a turn from half an utterance: the utterance it hit is
dropped (the user is told, ``ListenError``) and listening goes on. A stretch
of speech longer than ``[endpoint] max_utterance_s`` is ended there as if the
user had stopped (``UtteranceCapped``): its stream settles and what it heard is
the turn; the speech that goes on is not transcribed until the detector hears
a pause.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
import numpy as np
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from ..listening.decisions import (
    Decision,
    EndOfTurn,
    FinalizeStt,
    JudgeTurn,
    LateTranscript,
    NoWords,
    TentativeCancelled,
    TentativeEnd,
)
from ..listening.endpointer import Endpointer
from ..listening.front import SpeechFront
from ..listening.vad import SpeechEnd, SpeechStart, samples_after
from ..sources.base import Frame
from ..stt.base import SttEngine
from .frame_intake import FrameInlet, SourcePace, end_of_input
from .inbox import Inbox
from .listen_items import (
    BargeIn,
    Heard,
    ListenError,
    ListenItem,
    NoWordsHeard,
    SpeechBegan,
    SpeechEnded,
    TentativeDropped,
    TentativeTurn,
    UserTurn,
    UtteranceCapped,
)
from .stt_streams import ListenerInput, StreamEnded, StreamTranscript, UtteranceStreams
from .turn_judge import TurnJudge
from .vad_batch import VadBatcher

__all__ = [  # (what listeners' users import from here)
    "BargeIn",
    "FrameInlet",
    "Heard",
    "ListenError",
    "ListenItem",
    "Listener",
    "NoWordsHeard",
    "SourcePace",
    "SpeechBegan",
    "SpeechEnded",
    "TentativeDropped",
    "TentativeTurn",
    "UserTurn",
    "UtteranceCapped",
]

# Frames queued behind the one taken (a listener behind real time: an overloaded
# process) are heard together, up to this much audio: the detector and the
# endpointer decide by the audio's samples whatever its chunking, and the
# per-frame costs (a pass of the loop, a push to the STT) are paid once.
MERGE_QUEUED_S = 0.1


BACKLOG_FRAMES = 256  # frames waiting for a listener, by default


@dataclass(slots=True)
class _Times:
    """Wall-clock times of the utterance being heard (for voice-to-voice)."""

    speech_start_ns: int | None = None
    speech_end_ns: int | None = None
    final_ns: int | None = None
    turn_model_ms: float | None = None  # the end-of-turn model's time, last judgement


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
    # the end-of-turn model (when ``[endpoint] turn_model`` names one)
    turn_judge: TurnJudge | None = None
    _inbox: Inbox[ListenerInput] = field(init=False)
    _streams: UtteranceStreams = field(init=False)
    _times: _Times = field(default_factory=_Times, init=False)
    _last_frame: Frame | None = field(default=None, init=False)
    _last_arrival_ns: int = field(default=0, init=False)  # when it was taken
    _pace: SourcePace = field(default_factory=SourcePace, init=False)
    _tentative: bool = field(default=False, init=False)  # a TentativeTurn awaits its outcome
    _next: ListenerInput | None = field(default=None, init=False)  # taken while merging frames
    # where the stretch of speech being heard began (None: none, or it was capped)
    _speech_from: int | None = field(default=None, init=False)
    _capped: bool = field(default=False, init=False)  # the stretch heard was capped
    _judge_failed: bool = field(default=False, init=False)  # (said once)

    def __post_init__(self) -> None:
        if self.vad.sample_rate != self.stt.sample_rate:
            raise ValueError(
                f"the detector takes {self.vad.sample_rate} Hz, {self.stt.name} "
                f"{self.stt.sample_rate} Hz: open the source at the STT's rate"
            )
        self._inbox = Inbox[ListenerInput](self.backlog)
        self._streams = UtteranceStreams(self.stt, self._inbox)

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

    async def _receive(self, deadline: int | None) -> ListenerInput | None:
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

    async def _pump(self, frames: AsyncIterator[Frame], inbox: Inbox[ListenerInput]) -> None:
        last: Frame | None = None
        async for frame in frames:
            last = frame
            await inbox.put(frame)
        end = 0 if last is None else last.end
        await inbox.put(end_of_input(self.vad.sample_rate, end))

    def _take(self, item: StreamTranscript | StreamEnded | bool) -> list[Decision]:
        """An input for the endpointer. A stream's final settles the speech only
        when it is the last stream's and no earlier one is still decoding, and a
        stream's end only when it was the last running: fed faster than the STT
        decodes (a file, a client that ends its input), a stretch's final can
        come after later stretches of the same utterance were heard and asked
        to settle, and taken as theirs it ended the turn without their words
        (which then came after it, and were dropped)."""
        endpointer, streams = self.endpointer, self._streams
        now = self.vad.samples_fed
        if isinstance(item, bool):
            return endpointer.assistant_speaking(item, now)
        if isinstance(item, StreamTranscript):
            if streams.failed(item.stream):
                return []
            if item.transcript.final and item.transcript.text.strip():
                self._times.final_ns = item.at_ns
            settles = item.stream == streams.current and streams.running == 1
            # (a stream is opened at each speech start the endpointer is
            # given, in order: stream n is its n-th start's)
            return endpointer.transcript(item.transcript, now, start=item.stream, settles=settles)
        streams.ended(item)
        if item.error is not None or streams.running > 0:
            return []
        return endpointer.transcripts_done(now)

    async def _frame(
        self, frame: Frame, tg: TaskGroup, out: MemoryObjectSendStream[ListenItem]
    ) -> list[Decision]:
        self._last_frame, self._last_arrival_ns = frame, time.perf_counter_ns()
        self._pace.note(frame)
        if self.turn_judge is not None:
            self.turn_judge.note(frame)
        decisions: list[Decision] = []
        streams = self._streams
        pushed = False
        if self.vad_batch is None:
            events = self.vad.feed(frame.samples)
        else:
            events = await self.vad_batch.feed(self.vad, frame.samples)
        for event in events:
            if isinstance(event, SpeechStart):
                await out.send(SpeechBegan(event.at_sample / frame.sample_rate))
                self._times = _Times(speech_start_ns=_sample_ns(frame, event.at_sample))
                self._speech_from, self._capped = event.at_sample, False
                await streams.open(tg, event.audio_from / frame.sample_rate)
                if streams.is_open:
                    await streams.push(event.audio)
                    await streams.push(samples_after(frame.samples, frame.end, event.confirmed_at))
                    pushed = True
            elif isinstance(event, SpeechEnd):
                await out.send(SpeechEnded(event.at_sample / frame.sample_rate))
                if not self._capped:  # (a capped stretch's speech ended at the cap)
                    self._times.speech_end_ns = _sample_ns(frame, event.at_sample)
                self._speech_from = None
            decisions += self.endpointer.vad(event)
        if streams.is_open and not pushed:
            await streams.push(frame.samples)
        # (after the push: a decode started at the pause hears the frame too;
        # when quiet, the stop was confirmed and the stream is finalized next)
        if self.vad.speaking:
            await streams.hint_pause(self.vad.pausing)
        decisions += await self._cap(frame, out)
        return decisions + self.endpointer.advance(self.vad.samples_fed)

    async def _cap(self, frame: Frame, out: MemoryObjectSendStream[ListenItem]) -> list[Decision]:
        """A stretch of speech that reached ``max_utterance_s`` ends there for the
        endpointer (the detector still hears speech): its stream settles, what it
        heard becomes the turn, and nothing more is pushed until the next start."""
        max_s = self.endpointer.settings.max_utterance_s
        if self._speech_from is None or not max_s:
            return []
        at = self._speech_from + round(max_s * frame.sample_rate)
        if self.vad.samples_fed < at:
            return []
        self._speech_from, self._capped = None, True
        await out.send(UtteranceCapped(at / frame.sample_rate, max_s))
        self._times.speech_end_ns = _sample_ns(frame, at)
        return self.endpointer.vad(SpeechEnd(at, at))

    async def _decide(self, decision: Decision, out: MemoryObjectSendStream[ListenItem]) -> None:
        if isinstance(decision, FinalizeStt):
            await self._streams.finalize()
        elif isinstance(decision, JudgeTurn):
            await self._judge(decision, out)
        elif isinstance(decision, TentativeEnd):
            if not self._streams.failed() and not self._tentative:
                self._tentative = True
                await out.send(TentativeTurn(self._user_turn(decision.text, "tentative")))
        elif isinstance(decision, TentativeCancelled):
            await self._drop_tentative(out)
        elif isinstance(decision, EndOfTurn):
            if self._streams.failed() or not decision.text.strip():
                await self._drop_tentative(out)
                return  # (said when the stream failed): never a turn from half of it
            tentative = self._tentative and decision.tentative
            if tentative:
                self._tentative = False
            else:  # other words: the held reply was for something the user did not say
                await self._drop_tentative(out)
            await out.send(self._user_turn(decision.text, decision.reason, tentative))
        elif isinstance(decision, LateTranscript):
            # Its own turn, also after a turn of the same utterance (that turn closed
            # without these words: a recogniser slower than the final wait): the
            # words the user said are never dropped; the reply to the first half
            # gives way to them as to any next turn.
            if decision.text.strip():
                await out.send(self._user_turn(decision.text, "late"))
        elif isinstance(decision, NoWords):
            if not self._streams.failed():  # (a failed stream was said already)
                rate = self.vad.sample_rate
                speech_s = (decision.speech_end - decision.start) / rate
                await out.send(NoWordsHeard(decision.speech_end / rate, speech_s))
        else:
            await out.send(BargeIn(decision))

    async def _judge(self, ask: JudgeTurn, out: MemoryObjectSendStream[ListenItem]) -> None:
        """The end-of-turn model's answer, before any other input (``turn_judge``)."""
        probability = None
        if self.turn_judge is not None:
            judgement = await self.turn_judge.judge(ask)
            probability, self._times.turn_model_ms = judgement.probability, judgement.model_ms
            if judgement.error is not None and not self._judge_failed:
                self._judge_failed = True
                await out.send(
                    ListenError(
                        f"the end-of-turn model failed ({judgement.error}): "
                        "the silence rule decides the ends of turns"
                    )
                )
        for decision in self.endpointer.turn_judged(
            probability, ask.at_sample, speech_end=ask.speech_end
        ):
            await self._decide(decision, out)

    async def _tell(
        self, item: StreamTranscript | StreamEnded | bool, out: MemoryObjectSendStream[ListenItem]
    ) -> None:
        """What the user should see as it happens: transcripts, and a failed stream."""
        streams = self._streams
        if isinstance(item, StreamTranscript) and not streams.failed(item.stream):
            await out.send(Heard(item.transcript, streams.from_s(item.stream)))
        elif isinstance(item, StreamEnded) and item.error is not None:
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
            times.turn_model_ms,
        )

    async def _settle(self, out: MemoryObjectSendStream[ListenItem]) -> None:
        """The input ended: close the speech, let the STT settle, and give the
        endpointer the time its timers need (in samples: the input stopped)."""
        frame = self._last_frame
        for event in self.vad.flush():
            if isinstance(event, SpeechEnd) and frame is not None:
                await out.send(SpeechEnded(event.at_sample / frame.sample_rate))
                if not self._capped:
                    self._times.speech_end_ns = _sample_ns(frame, event.at_sample)
            for decision in self.endpointer.vad(event):
                await self._decide(decision, out)
        await self._streams.finalize()
        while self._streams.running > 0:
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

"""A caller of the voice-over-the-endpoint measurement (``voice_serve``), run by
the ``voice_callers`` process: a served session (protocol 1.1) with
``input_audio`` (pcm16, ``CallerPlan.sample_rate``, ``frame_ms`` frames) into
which, once told to go, it sends audio in real time until its turns are done —
silence, and its question at a random moment within the ramp, then again
``think_s`` after the answer finished playing.

Per question, client side (``VoiceTurnRecord``):

- *speech end*: when the question's last voiced sample (``CallerPlan.voiced_end``,
  found from its level) was captured, as a microphone dates it: the send of the
  frame holding it less the rest of that frame (``voiced.captured_at``); and
  that sample's position in the session's input audio (the interruption's
  onset is dated alike);
- *voice to voice*: the answer's first audio frame's arrival - the speech end;
- the detector's own speech end (``vad.speech_end`` ``at_ms``), the server's
  ``voice_to_voice`` figures (``metrics``), what was heard (``turn.started``),
  and errors (``error`` events, a turn with no audio or no answer in time, lost
  frames, an unexpected close).

The frames go out on an absolute schedule (frame n at start + n x frame_ms); the
process records how late its sends ran, and its own event-loop lag, so a client
that could not keep up is seen, not mistaken for the server.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import numpy as np
import soundfile as sf  # type: ignore[import-untyped]
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from ..server.protocol import unpack_frame
from ..vocab.audio import Samples
from .clients import ClientResult, describe, end_session, open_session
from .voiced import captured_at

SERVER_FIGURES = ("endpointing_ms", "transcript_final_ms", "request_ms", "voice_to_voice_ms")
# The reply's own stamps (ms after its request), from the same report.
REPLY_STAMPS = ("first_token", "first_chunk", "tts_request", "tts_first_byte", "first_audio")


def server_figures(
    voice_to_voice: dict[str, Any] | None, stamps_ms: dict[str, Any] | None
) -> dict[str, float | None]:
    """What a turn's report (a ``metrics`` event's, a ``turn_end`` log line's)
    says of its voice to voice and the reply's stages."""
    figures, stamps = voice_to_voice or {}, stamps_ms or {}
    return {name: figures.get(name) for name in SERVER_FIGURES} | {
        name: stamps.get(name) for name in REPLY_STAMPS
    }


@dataclass(frozen=True, slots=True)
class CallerPlan:
    """What every caller does: ``turns`` times, say ``question`` (a WAV at
    ``sample_rate``; its last voiced sample is ``voiced_end``) as ``frame_ms``
    frames, the first time at a random moment within ``ramp_s``, then each
    ``think_s`` after the answer finished playing; the answer comes as pcm16 at
    ``output_rate`` in ``output_frame_ms`` frames."""

    question: str  # a path
    voiced_end: int  # samples into the question
    sample_rate: int
    frame_ms: int
    output_rate: int
    turns: int
    ramp_s: float
    think_s: float
    turn_timeout_s: float  # no answer by then: the turn failed
    route: str = "session"  # /v1/session (protocol 1.1) or "twilio" (/v1/twilio)
    # Barge-in: say this recording (a path) ``interrupt_after_s`` into each
    # answer; its onset is its first voiced sample (found from its level).
    interrupt: str | None = None
    interrupt_onset: int = 0
    interrupt_after_s: float = 0.5
    output_frame_ms: int = 20  # as session.start asks (protocol 1.2; /v1/session only)
    # /v1/twilio: the public URL the calls are signed for (serve's --twilio-url), when
    # it is not the one called (a rehearsal on loopback of a server behind a proxy).
    sign_url: str | None = None

    @property
    def frame_samples(self) -> int:
        return self.sample_rate * self.frame_ms // 1000

    def input_audio(self) -> dict[str, Any]:
        return {"encoding": "pcm16", "sample_rate": self.sample_rate, "frame_ms": self.frame_ms}


@dataclass
class VoiceTurnRecord:
    number: int = 0  # the caller's question: 1, 2, …
    turn: int | None = None  # the server's turn it became
    heard: str | None = None  # turn.started's text
    speech_end_position_ms: float | None = None  # the voiced end, in the session's input audio
    detector_end_ms: float | None = None  # vad.speech_end's at_ms
    voice_to_voice_ms: float | None = None  # at the client
    barge_in_ms: float | None = None  # the interruption's onset captured → barge_in (pause) came
    barge_in: list[str] = field(default_factory=list)  # the barge_in actions seen
    send_late_ms: float = 0.0  # the question's frames: the latest send after its schedule
    audio_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    server: dict[str, float | None] = field(default_factory=dict)  # metrics' voice_to_voice
    call: str | None = None  # a phone call's callSid (its server figures are in the log)


class CallerResult(ClientResult[VoiceTurnRecord]):
    """A caller process's result (``clients.ClientResult``, its turns questions)."""


def read_question(path: str, rate: int) -> Samples:
    samples, file_rate = sf.read(path, dtype="int16")
    if file_rate != rate or samples.ndim != 1:
        raise ValueError(f"{path}: a mono {rate} Hz recording is needed")
    return np.asarray(samples, dtype=np.int16)


class VoiceCaller:
    """One caller's session: a sender of real-time audio and a receiver of the
    answer, with the question being said (``_record``) between them."""

    def __init__(self, url: str, plan: CallerPlan, question: Samples, result: CallerResult):
        self.url, self.plan, self.result = url, plan, result
        self.question = question
        self.ws: ClientConnection | None = None
        self.interrupt = (
            None if plan.interrupt is None else read_question(plan.interrupt, plan.sample_rate)
        )
        self._speaking: VoiceTurnRecord | None = None  # the question being sent
        self._clip = question  # what is being said: the question or the interruption
        self._said = 0  # its samples sent so far
        self._barge_at: float | None = None  # when to say the interruption
        self._onset_at: float | None = None  # when its onset was captured
        self._later_turn_ended = anyio.Event()  # (barge-in) the interruption's own turn
        self._position = 0  # samples sent in the session
        self._speech_end_at: dict[int, float] = {}  # captured, by question number
        self._record: VoiceTurnRecord | None = None  # the question awaiting its answer
        self._answered = anyio.Event()
        self._last_seq: int | None = None
        self._play_end = 0.0  # when the audio received so far has finished playing
        self._first_audio: set[int] = set()  # turns whose first frame came

    @contextlib.asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        await self.open()
        try:
            yield
        finally:
            await self.close()

    async def open(self) -> None:
        plan = self.plan
        audio = {
            "encoding": "pcm16",
            "sample_rate": plan.output_rate,
            "frame_ms": plan.output_frame_ms,
        }
        self.ws, started = await open_session(self.url, audio=audio, input_audio=plan.input_audio())
        if started.get("input_audio") is None:
            raise RuntimeError("the served pipeline does not listen (no [stt])")

    async def run(self, delay: float) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(self._send_audio)
            group.start_soon(self._receive)
            try:
                await anyio.sleep(delay)
                for number in range(1, self.plan.turns + 1):
                    if not await self._ask(number):
                        break
                    wait = max(0.0, self._play_end - time.perf_counter()) + self.plan.think_s
                    await anyio.sleep(wait)
            finally:
                group.cancel_scope.cancel()

    async def _ask(self, number: int) -> bool:
        """Say the question, wait for its answer to end; False: the call is over."""
        record = VoiceTurnRecord(number)
        self.result.turns.append(record)
        self._answered = anyio.Event()
        self._later_turn_ended = anyio.Event()
        self._record = record
        self._say(self.question, record)
        try:
            with anyio.fail_after(self.plan.turn_timeout_s):
                await self._answered.wait()
                if self.interrupt is not None and record.turn is not None:
                    await self._later_turn_ended.wait()  # the interruption's answer
        except TimeoutError:
            record.errors.append("no answer in time" if record.turn is None else "timeout")
            return False
        if record.voice_to_voice_ms is None:
            record.errors.append("no audio")
        if self.interrupt is not None and record.barge_in_ms is None:
            record.errors.append("no barge_in")
        return not any(e.startswith("closed") for e in record.errors)

    def _say(self, clip: Samples, record: VoiceTurnRecord) -> None:
        self._clip, self._said, self._speaking = clip, 0, record

    def _next_frame(self) -> tuple[Samples, VoiceTurnRecord | None]:
        """The next frame: the question's, else silence (a muted microphone)."""
        n = self.plan.frame_samples
        if self._barge_at is not None and time.perf_counter() >= self._barge_at:
            assert self.interrupt is not None and self._record is not None
            self._barge_at = None
            self._say(self.interrupt, self._record)
        record = self._speaking
        if record is None:
            return np.zeros(n, dtype=np.int16), None
        piece = self._clip[self._said : self._said + n]
        self._said += n
        if self._said >= len(self._clip):
            self._speaking = None
        if len(piece) < n:
            piece = np.concatenate([piece, np.zeros(n - len(piece), dtype=np.int16)])
        return piece, record

    async def _send_audio(self) -> None:
        ws = self.ws
        assert ws is not None
        step = self.plan.frame_ms / 1000
        start = time.perf_counter()
        n = 0
        while True:
            due = start + n * step
            await anyio.sleep(max(0.0, due - time.perf_counter()))
            piece, record = self._next_frame()
            clip = self._clip
            said_before = self._said - len(piece)
            now = time.perf_counter()
            late_ms = (now - due) * 1000
            self.result.send_late_ms.append(late_ms)
            try:
                await ws.send(piece.tobytes())
            except ConnectionClosed:
                return  # the receiver reports the close
            frame_end, rate = said_before + len(piece), self.plan.sample_rate
            if record is not None and clip is self.interrupt:
                onset = self.plan.interrupt_onset
                if said_before <= onset < frame_end:
                    self._onset_at = captured_at(now, frame_end, onset, rate)
            elif record is not None:
                record.send_late_ms = max(record.send_late_ms, late_ms)
                end = self.plan.voiced_end
                if said_before <= end < frame_end:
                    position = self._position + end + 1 - said_before  # (its end)
                    record.speech_end_position_ms = position * 1000 / rate
                    # the end of the last voiced sample, as a microphone dates it
                    self._speech_end_at[record.number] = captured_at(now, frame_end, end + 1, rate)
            self._position += len(piece)
            n += 1

    async def _receive(self) -> None:
        ws = self.ws
        assert ws is not None
        try:
            async for message in ws:
                now = time.perf_counter()
                if isinstance(message, bytes):
                    self._on_audio(message, now)
                else:
                    self._on_event(json.loads(message), now)
        except ConnectionClosed as error:
            self._fail(describe(error))
            return
        self._fail(f"closed {ws.close_code}")

    def _fail(self, error: str) -> None:
        if self._record is not None:
            self._record.errors.append(error)
            self._answered.set()
        else:
            self.result.errors.append(error)

    def _on_audio(self, message: bytes, now: float) -> None:
        turn, seq, audio = unpack_frame(message)
        record = self._record
        if self._last_seq is not None and seq != self._last_seq + 1 and record is not None:
            record.errors.append(f"lost {seq - self._last_seq - 1} frame(s)")
        self._last_seq = seq
        if record is None or record.turn is None or turn < record.turn:
            return  # an earlier turn's frame, dropped as a player does
        seconds = len(audio) / 2 / self.plan.output_rate
        if turn > record.turn:  # the interruption's answer: played too
            self._play_end = max(self._play_end, now) + seconds
            return
        record.audio_s += seconds
        if turn not in self._first_audio:
            self._first_audio.add(turn)
            ended = self._speech_end_at.get(record.number)
            if ended is not None:
                record.voice_to_voice_ms = round((now - ended) * 1000, 3)
            self._play_end = now
            if self.interrupt is not None:
                self._onset_at = None
                self._barge_at = now + self.plan.interrupt_after_s
        self._play_end = max(self._play_end, now) + seconds

    def _on_event(self, event: dict[str, Any], now: float) -> None:
        kind = event.get("type")
        record = self._record
        if kind == "error":
            target = record.errors if record is not None else self.result.errors
            target.append(f"error {event.get('code')}")
        if record is None:
            return
        if kind == "turn.end" and record.turn is not None and event.get("turn", 0) > record.turn:
            self._later_turn_ended.set()
        if kind == "barge_in" and event.get("turn") == record.turn:
            record.barge_in.append(str(event.get("action")))
            if record.barge_in_ms is None and self._onset_at is not None:
                record.barge_in_ms = round((now - self._onset_at) * 1000, 3)
        elif kind == "vad.speech_end" and record.turn is None:
            record.detector_end_ms = event.get("at_ms")
        elif kind == "turn.started" and event.get("source") == "voice" and record.turn is None:
            record.turn = int(event["turn"])
            record.heard = str(event.get("text", ""))
        elif kind == "metrics" and event.get("turn") == record.turn:
            report = event.get("report") or {}
            record.server = server_figures(report.get("voice_to_voice"), report.get("stamps_ms"))
        elif kind == "turn.end" and event.get("turn") == record.turn:
            if event.get("error"):
                record.errors.append(f"turn.end error: {event['error']}")
            if event.get("interrupted") and self.interrupt is None:
                record.errors.append("interrupted")
            self._answered.set()  # (its metrics event came before it)

    async def close(self) -> None:
        if self.ws is not None:
            await end_session(self.ws, self.result.errors)

"""The audio sink of a phone call, whatever its carrier: ``media``, marks and ``clear``.

The carrier's wire (``carrier_wire.CarrierWire``: Twilio's ``mark``, Telnyx's
``mark``, Plivo's ``checkpoint``) builds the messages; what follows is the
same for all of them, told in Twilio's words.

Audio is converted to μ-law 8 kHz (a low-pass resampler that keeps its state
across chunks) and sent as 20 ms ``media`` messages on the call's outbox,
paced at real time with a small lead as the WebSocket sink does, with a
``mark`` after every ``MARK_EVERY_S`` of audio and at the end of each
utterance (``drain``). As the WebSocket sink, it tops Twilio up in batches: a
frame that would pass ``lead_s`` waits until Twilio holds ``lead_s -
refill_s``, so ``refill_s`` of media go out at a time (one wake-up, one pass
of the event loop and one socket write per batch, not per 20 ms frame; Twilio
buffers what it is sent and plays it in order), and the turn hands the sink
``write_block_s`` at a time.

What the caller has heard comes from the marks Twilio echoes once the audio
before them has played (``on_mark``): ``played_seconds`` is the audio up to
the last echoed mark, so it lags the caller's ear by at most one mark interval
plus the trip back, never runs ahead of it. A stream that does not echo marks
(its oldest pending mark ``silent_marks_s`` past the moment its audio should
have played) is not taken to have played nothing: when the answer is cut
(``pause``, ``stop``) what played is estimated from the send clock instead —
the audio sent, less what had not yet had time to play at real time.

``pause()`` (the caller speaks over the answer) sends ``clear`` at once: Twilio
empties its buffer and echoes the marks still pending — those did not play and
are ignored. The audio sent but not confirmed by a mark is kept, and
``resume()`` sends it again from the last confirmed mark, so nothing the caller
did not hear is lost (what played between that mark and the clear is heard
twice: at most a mark interval and a round trip). ``stop()`` sends ``clear``
too and drops it all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import anyio
import numpy as np

from ..sources._resample import StreamResampler, to_int16
from ..vocab.audio import AudioChunk, Samples, pcm16_from_ulaw, ulaw_from_pcm16
from .carrier_wire import FRAME_BYTES, SAMPLE_RATE, CarrierWire
from .outbox import Audio, Item
from .pacing import LEAD_S, REFILL_S, BatchPacer

MARK_EVERY_S = 0.1
# How long drain waits for Twilio to echo the last mark once the audio should have
# played: past it, the audio counts as heard (a stream that never echoes marks).
ECHO_TIMEOUT_S = 2.0
# A mark this late (past when its audio should have played) and not echoed: the
# stream does not echo marks, and what was heard is estimated from the clock.
# (Twilio echoes within a round trip: a few hundred ms.)
SILENT_MARKS_S = 1.0
MARK_PREFIX = "vm"


class CallOutbox(Protocol):
    """What the sink needs of ``outbox.Outbox``."""

    def put(self, item: Item) -> bool: ...

    def drop_audio(self, turn: int) -> int: ...


class PhoneSink:
    def __init__(
        self,
        outbox: CallOutbox,
        stream_sid: str,
        wire: CarrierWire,
        *,
        lead_s: float = LEAD_S,
        refill_s: float = REFILL_S,
        mark_every_s: float = MARK_EVERY_S,
        echo_timeout_s: float = ECHO_TIMEOUT_S,
        silent_marks_s: float = SILENT_MARKS_S,
        on_overflow: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = wire.name
        self._wire = wire
        self.sample_rate = SAMPLE_RATE
        self.stream_sid = stream_sid
        self._pacer = BatchPacer(FRAME_BYTES / SAMPLE_RATE, lead_s, refill_s)
        self.lead_s, self.write_block_s = lead_s, self._pacer.write_block_s
        self.echo_timeout_s = echo_timeout_s
        self._silent_marks_ns = round(silent_marks_s * 1e9)
        self.turn = 0  # set by the session before each turn: queued media carry it
        self._outbox = outbox
        self._on_overflow = on_overflow
        self._mark_every = max(FRAME_BYTES, round(mark_every_s * SAMPLE_RATE))
        self._resampler: StreamResampler | None = None
        self._resampler_rate = 0
        self._carry: Samples = np.zeros(0, dtype=np.int16)
        # Pacing: when the audio sent so far will have played at Twilio (an estimate:
        # marks say what actually did).
        self._ends_ns = 0
        self._resumed: anyio.Event | None = None  # set while paused
        self._utterance_open = False
        self._first_ns: int | None = None
        self._utterance_start = 0  # the confirmed position when the utterance began
        # The timeline, in samples (one μ-law byte each) of distinct audio since open:
        # a re-sent sample keeps its place.
        self._position = 0  # sent (or queued) up to here
        self._confirmed = 0  # Twilio echoed a mark here: heard
        self._unconfirmed = bytearray()  # the μ-law of [confirmed, position)
        self._last_mark_at = 0
        self._next_mark = 0
        # (mark number, position, when its audio should have played), in order
        self._pending: list[tuple[int, int, int]] = []
        self._ignore_below = 0  # marks numbered below this were cleared
        self._progress = anyio.Event()
        self.marks_sent = 0
        self.clears_sent = 0
        self._stops = 0  # stop() calls: a write waiting across one sends no more
        # told each frame sent (PCM at 8 kHz) and when Twilio should play it: the
        # echo canceller's reference (pipeline/echo_intake.py)
        self.on_sent: Callable[[Samples, int, int], None] | None = None

    async def open(self) -> None:
        self._ends_ns = time.perf_counter_ns()
        self._reset_utterance()
        self._position = self._confirmed = self._last_mark_at = 0
        self._unconfirmed.clear()
        self._pending.clear()
        self._first_ns = None
        self._utterance_open = False
        self.resume()

    @property
    def paused(self) -> bool:
        return self._resumed is not None

    async def _wait_resumed(self) -> None:
        while self._resumed is not None:
            await self._resumed.wait()

    # Writing

    async def write(self, chunk: AudioChunk) -> None:
        stops = self._stops
        await self._wait_resumed()  # paused: nothing more goes out
        if self._stops != stops:
            return  # stopped meanwhile: this is the interrupted answer's
        if not self._utterance_open:
            self._utterance_open, self._first_ns = True, None
        samples = self._convert(chunk)
        if len(self._carry):
            samples = np.concatenate([self._carry, samples])
        whole = len(samples) - len(samples) % FRAME_BYTES
        self._carry = samples[whole:]
        ulaw = ulaw_from_pcm16(samples[:whole])
        for start in range(0, whole, FRAME_BYTES):
            if wait_s := self._pacer.wait_s(self._ends_ns, time.perf_counter_ns()):  # past the lead
                await anyio.sleep(wait_s)
                await self._wait_resumed()  # paused meanwhile: nothing more goes out
                if self._stops != stops:
                    return  # stopped meanwhile: nothing of it follows the clear
            self._send_frame(ulaw[start : start + FRAME_BYTES])
        # Within the lead a write does not yield: its frames go out in one pass of
        # the event loop, and so in one socket write (the outbox's sender).

    def _convert(self, chunk: AudioChunk) -> Samples:
        if chunk.sample_rate == SAMPLE_RATE:
            return chunk.samples
        if self._resampler is None or self._resampler_rate != chunk.sample_rate:
            self._flush_resampler()
            self._resampler = StreamResampler(chunk.sample_rate, SAMPLE_RATE)
            self._resampler_rate = chunk.sample_rate
        return to_int16(self._resampler.feed(chunk.samples.astype(np.float64)))

    def _flush_resampler(self) -> None:
        if self._resampler is not None:
            tail = to_int16(self._resampler.flush())
            self._carry = np.concatenate([self._carry, tail])
            self._resampler = None

    def _send_frame(self, ulaw: bytes, *, marks: bool = True) -> None:
        now = time.perf_counter_ns()
        if self._first_ns is None:
            self._first_ns = now
        if self.on_sent is not None:
            self.on_sent(pcm16_from_ulaw(ulaw), SAMPLE_RATE, max(self._ends_ns, now))
        self._ends_ns = max(self._ends_ns, now) + len(ulaw) * 1_000_000_000 // SAMPLE_RATE
        self._put(self._wire.media(self.stream_sid, ulaw))
        self._unconfirmed += ulaw
        self._position += len(ulaw)
        if marks and self._position - self._last_mark_at >= self._mark_every:
            self._send_mark()

    def _send_mark(self) -> None:
        number = self._next_mark
        self._next_mark += 1
        self._pending.append((number, self._position, self._ends_ns))
        self._last_mark_at = self._position
        self._put(self._wire.mark(self.stream_sid, f"{MARK_PREFIX}{number}"))
        self.marks_sent += 1

    def _put(self, message: str) -> None:
        # Media and marks go as the turn's audio: an interruption drops them together.
        if not self._outbox.put(Audio(self.turn, message)):
            self._on_overflow()

    # Twilio's echoes

    def on_mark(self, name: str) -> bool:
        """Twilio echoed the mark ``name``: the audio before it has played (unless a
        ``clear`` sent it back unplayed). False: a name this sink never sent."""
        number = _mark_number(name)
        if number is None or number >= self._next_mark:
            return False
        if number < self._ignore_below:
            return True  # cleared: it did not play
        positions = [p for n, p, _ in self._pending if n == number]
        if positions:  # (else echoed already)
            # Twilio plays in order: the marks before it have played too.
            self._confirm(positions[0])
        return True

    def _confirm(self, position: int) -> None:
        """Heard up to ``position``: the marks up to it are done with."""
        self._pending = [m for m in self._pending if m[1] > position]
        if position > self._confirmed:
            del self._unconfirmed[: position - self._confirmed]
            self._confirmed = position
        self._wake()

    def _confirm_by_clock(self) -> None:
        """The answer is cut now: on a stream that does not echo marks, what has
        played is estimated from the send clock (Twilio plays what it is sent in
        order, at real time), not taken to be nothing."""
        now = time.perf_counter_ns()
        if not self._pending or now - self._pending[0][2] < self._silent_marks_ns:
            return  # marks come back (or may yet): they say what played
        unplayed = max(0, self._ends_ns - now) * SAMPLE_RATE // 1_000_000_000
        self._confirm(max(self._confirmed, self._position - unplayed))

    def _wake(self) -> None:
        self._progress.set()
        self._progress = anyio.Event()

    # Ending, pausing

    async def drain(self) -> None:
        await self._wait_resumed()  # a held answer's tail waits for the resume
        self._flush_resampler()
        if len(self._carry):
            self._send_frame(ulaw_from_pcm16(self._carry), marks=False)
            self._carry = np.zeros(0, dtype=np.int16)
        last = self._pending[-1][1] if self._pending else self._confirmed
        if self._position > last:
            self._send_mark()  # the end of the utterance
        while True:  # until our estimate of Twilio's playback has ended
            await self._wait_resumed()
            await anyio.sleep(max(0.0, (self._ends_ns - time.perf_counter_ns()) / 1e9))
            if not self.paused:
                break
        await self._wait_echoes()
        self._reset_utterance()
        self._utterance_open = False

    async def _wait_echoes(self) -> None:
        """Until Twilio has echoed every mark (a pause waits for its resume); a
        Twilio silent for ``echo_timeout_s`` is taken to have played it all."""
        while self._confirmed < self._position:
            await self._wait_resumed()
            progress = self._progress
            with anyio.move_on_after(self.echo_timeout_s) as waited:
                await progress.wait()
            if waited.cancelled_caught and not self.paused:
                self._confirmed = self._position
                self._forget_pending()

    def pause(self) -> bool:
        """``clear`` at once (if Twilio may hold audio not yet heard); what was not
        confirmed heard is sent again on ``resume``. A reply held before it starts
        (``Session.hold_playout``) sends nothing."""
        if self._resumed is None:
            self._resumed = anyio.Event()
            if self._position > self._confirmed:
                self._confirm_by_clock()
                self._clear()
        return True

    def resume(self) -> None:
        resumed, self._resumed = self._resumed, None
        if resumed is None:
            return
        resumed.set()
        # Twilio's buffer is empty since the clear. Again from the last confirmed
        # mark, with marks where they were (new names: echoes of the old ones are
        # the clear's).
        self._ends_ns = time.perf_counter_ns()
        base = self._confirmed
        audio, self._unconfirmed = bytes(self._unconfirmed), bytearray()
        marks = {p - base for _, p, _ in self._pending}
        self._pending = []
        self._position = self._last_mark_at = base
        start = 0
        for cut in sorted(m for m in marks | {len(audio)} if 0 < m <= len(audio)):
            for frame in range(start, cut, FRAME_BYTES):
                self._send_frame(audio[frame : min(frame + FRAME_BYTES, cut)], marks=False)
            if cut in marks:
                self._send_mark()
            start = cut

    async def stop(self) -> None:
        """Interruption: ``clear``, and everything not yet heard is dropped."""
        self._stops += 1
        if self._resumed is None:
            if self._position > self._confirmed or len(self._carry):
                self._confirm_by_clock()
                self._clear()
        else:  # paused: cleared already; the writers waiting for a resume go on
            resumed, self._resumed = self._resumed, None
            resumed.set()
        if self._first_ns is not None and self._confirmed == self._utterance_start:
            self._first_ns = None  # nothing of it was heard
        self._position = self._last_mark_at = self._confirmed
        self._unconfirmed.clear()
        self._ends_ns = time.perf_counter_ns()
        self._forget_pending()
        self._reset_utterance()
        self._utterance_open = False

    def _clear(self) -> None:
        self._outbox.drop_audio(self.turn)  # queued media never go out after the clear
        if not self._outbox.put(self._wire.clear(self.stream_sid)):
            self._on_overflow()
        self.clears_sent += 1
        self._ignore_below = self._next_mark  # echoes of marks sent so far: the clear's

    def _forget_pending(self) -> None:
        self._unconfirmed.clear()
        self._pending.clear()
        self._ignore_below = self._next_mark
        self._wake()

    def _reset_utterance(self) -> None:
        self._resampler = None
        self._carry = np.zeros(0, dtype=np.int16)
        self._utterance_start = self._confirmed

    @property
    def played_seconds(self) -> float:
        return self._confirmed / SAMPLE_RATE

    @property
    def first_played_ns(self) -> int | None:
        return self._first_ns

    async def aclose(self) -> None:
        await self.stop()


def _mark_number(name: str) -> int | None:
    digits = name.removeprefix(MARK_PREFIX)
    if digits == name or not digits.isdigit() or len(digits) > 18:
        return None
    return int(digits)

"""The audio sink of a served session: binary frames on the session's socket.

Audio is cut into frames of ``frame_ms`` (20 ms unless the client asked for
40 or 60): a frame is shorter only as the last of a turn, or when a write
leaves a part of a frame while the client holds less than ``lead_s -
refill_s`` (a turn's start: held back, it could be heard as a gap). Frames are
converted to the session's format (resampled; μ-law for telephony) and queued
on the session's ``Outbox``, paced at real time with a small lead: no frame
goes out more than ``lead_s`` ahead of a client that
started playing each frame when it was sent. A frame that would pass the lead
waits until the client holds ``lead_s - refill_s``, so frames go out
``refill_s`` at a time (one wake-up, one pass of the event loop and one socket
write per batch rather than per 20 ms frame) and the client holds at least
``lead_s - refill_s`` while the reply keeps up. A write of any length is paced
so; the turn hands this sink ``write_block_s`` at a time. So, as on
a speaker, ``played_seconds`` is what the client has heard (within the lead),
``first_played_ns`` is when the first frame went out, and ``stop()`` drops the
frames still queued at once (the client drops those it holds, by turn).
``pause()`` sends nothing more until ``resume()``: the client plays out what
it holds (at most the lead) and waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import anyio
import numpy as np

from ..sinks.clock import PlaybackClock
from ..vocab.audio import AudioChunk, Samples, resample, ulaw_from_pcm16
from .outbox import Audio, Outbox
from .pacing import LEAD_S, REFILL_S, BatchPacer
from .protocol import FRAME_MS, pack_frame

_NONE: Samples = np.zeros(0, dtype=np.int16)


class SocketSink:
    def __init__(
        self,
        outbox: Outbox,
        *,
        encoding: Literal["pcm16", "mulaw"] = "pcm16",
        sample_rate: int = 24000,
        lead_s: float = LEAD_S,
        refill_s: float = REFILL_S,
        frame_ms: int = FRAME_MS,
        on_overflow: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = "websocket"
        self.sample_rate = sample_rate
        self.encoding = encoding
        self.frame_ms = frame_ms
        self._pacer = BatchPacer(frame_ms / 1000, lead_s, refill_s)
        self.lead_s, self.write_block_s = lead_s, self._pacer.write_block_s
        self.turn = 0  # set by the session before each turn: frames carry it
        self.sequence = 0  # the next frame's number (per session)
        self._outbox = outbox
        self._on_overflow = on_overflow  # the client is not taking its audio
        self._unread_limit: int | None = None  # the frame count it must not reach
        self._frame = sample_rate * frame_ms // 1000
        self._carry: Samples = _NONE
        # Stands in for the client's playback: frames back to back, an idle client's at once.
        self._clock = PlaybackClock()

    async def open(self) -> None:
        self._clock.open()

    async def write(self, chunk: AudioChunk) -> None:
        await self._clock.wait_resumed()  # paused: nothing more goes out
        self._clock.begin_write()
        samples = chunk.samples
        if chunk.sample_rate != self.sample_rate:
            samples = resample(samples, chunk.sample_rate, self.sample_rate)
        if len(self._carry):
            samples = np.concatenate([self._carry, samples])
        whole = len(samples) - len(samples) % self._frame
        self._carry = samples[whole:]
        for start in range(0, whole, self._frame):
            if wait_s := self._pacer.wait_s(
                self._clock.ends_ns, time.perf_counter_ns()
            ):  # past the lead
                await anyio.sleep(wait_s)
                await self._clock.wait_resumed()
            self._send(samples[start : start + self._frame])
        if len(self._carry) and self._pacer.running_low(
            self._clock.ends_ns, time.perf_counter_ns()
        ):
            self._send(self._carry)  # a short frame rather than a gap
            self._carry = _NONE
        # Within the lead a write does not yield: its frames go out in one pass of
        # the event loop (the stage checks for cancellation between writes).

    def _send(self, samples: Samples) -> None:
        self._clock.play(len(samples) / self.sample_rate, time.perf_counter_ns())
        audio = ulaw_from_pcm16(samples) if self.encoding == "mulaw" else samples.tobytes()
        if not self._outbox.put(Audio(self.turn, pack_frame(self.turn, self.sequence, audio))):
            self._on_overflow()
        self.sequence += 1
        if self._unread_limit is not None and self.sequence >= self._unread_limit:
            self._unread_limit = None
            self._on_overflow()

    def expect_read(self, frames: int) -> None:
        """A ping has gone out behind the frames sent so far: unless
        ``read_confirmed`` comes first, ``frames`` more sent mean the client
        has that much waiting unread, and it is dropped (``on_overflow``)."""
        self._unread_limit = self.sequence + frames

    def read_confirmed(self) -> None:
        """The client answered the ping: it reads."""
        self._unread_limit = None

    async def drain(self) -> None:
        if len(self._carry):
            self._send(self._carry)
            self._carry = _NONE
        await self._clock.wait_played()

    async def stop(self) -> None:
        self._clock.stop()
        self._carry = _NONE
        self._outbox.drop_audio(self.turn)

    def pause(self) -> bool:
        """Send no more audio until ``resume``: the client plays out what it
        holds (at most the lead) and waits."""
        self._clock.pause()
        return True

    def resume(self) -> None:
        self._clock.resume()

    @property
    def played_seconds(self) -> float:
        return self._clock.played_seconds

    @property
    def first_played_ns(self) -> int | None:
        return self._clock.first_played_ns

    async def aclose(self) -> None:
        await self.stop()

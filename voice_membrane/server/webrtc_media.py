"""A WebRTC session's audio: the answer out on an aiortc track, the client's voice in.

Out: the session's sink is a ``SocketSink`` (its pacing, pause, interrupt and
``played_seconds``) whose frames go into a ``SampleQueue`` instead of the
socket; ``OutboundTrack.recv`` takes 20 ms of it on its own clock, silence when
the queue is empty, and aiortc encodes it as Opus. The sink runs at most its
lead ahead of the track, so the queue holds at most that much; an interrupted
turn empties it at once.

In: aiortc decodes the client's Opus (48 kHz, stereo, its jitter buffer in
front); ``mono_pcm16`` makes each frame the bytes a WebSocket client would send
as 48 kHz pcm16 (``TRACK_INPUT``), and the session hears them as it hears those.
"""

from __future__ import annotations

import fractions
import time
from collections import deque
from typing import Any

import anyio
import numpy as np
from aiortc.jitterbuffer import JitterBuffer
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from av import AudioFrame

from ..vocab.audio import Samples
from .outbox import Outbox
from .protocol import InputAudio, Pcm16Format
from .socket_sink import SocketSink

RATE = 48000  # Opus's clock: both ways
FRAME = RATE * 20 // 1000  # what the track hands aiortc at a time
JITTER_CAPACITY = 16  # packets (320 ms of 20 ms ones): aiortc's own for audio
# The formats a WebRTC session reports (its tracks decide them, not session.start).
TRACK_AUDIO = Pcm16Format(encoding="pcm16", sample_rate=RATE, frame_ms=20)
TRACK_INPUT = InputAudio(encoding="pcm16", sample_rate=RATE, frame_ms=20)


class SampleQueue:
    """The answer's samples between the sink and the track (sans-I/O)."""

    def __init__(self) -> None:
        self._chunks: deque[Samples] = deque()
        self._held = 0
        self.taken = 0  # samples handed to the track, silence included
        self.sounded = 0  # of them, the sink's (not silence)

    def push(self, samples: Samples) -> None:
        if len(samples):
            self._chunks.append(samples)
            self._held += len(samples)

    def clear(self) -> None:
        self._chunks.clear()
        self._held = 0

    @property
    def held(self) -> int:
        return self._held

    def take(self, n: int) -> Samples:
        """``n`` samples: the queue's, then silence."""
        out = np.zeros(n, dtype=np.int16)
        filled = 0
        while filled < n and self._chunks:
            chunk = self._chunks[0]
            part = chunk[: n - filled]
            out[filled : filled + len(part)] = part
            filled += len(part)
            if len(part) == len(chunk):
                self._chunks.popleft()
            else:
                self._chunks[0] = chunk[len(part) :]
        self._held -= filled
        self.taken += n
        self.sounded += filled
        return out


class OutboundTrack(MediaStreamTrack):
    """The answer's audio track: 20 ms frames at real time from ``queue``."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self.queue = SampleQueue()
        self._start: float | None = None
        self._pts = 0

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        now = time.monotonic()
        if self._start is None:
            self._start = now
        else:
            self._pts += FRAME
            # Its own clock, as aiortc's AudioStreamTrack: a late wake-up is caught up.
            if (wait := self._start + self._pts / RATE - now) > 0:
                await anyio.sleep(wait)
        samples = self.queue.take(FRAME)
        frame = AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = RATE
        frame.pts = self._pts
        frame.time_base = fractions.Fraction(1, RATE)
        return frame


class TrackSink(SocketSink):
    """A ``SocketSink`` whose frames go to the track instead of the socket."""

    def __init__(self, outbox: Outbox, track: OutboundTrack) -> None:
        super().__init__(outbox, sample_rate=RATE, frame_ms=20)
        self.name = "webrtc"
        self.track = track

    def _send(self, samples: Samples) -> None:
        self._clock.play(len(samples) / self.sample_rate, time.perf_counter_ns())
        self.track.queue.push(samples)
        self.sequence += 1

    async def stop(self) -> None:
        await super().stop()
        self.track.queue.clear()  # what the client would have heard next: gone now


def mono_pcm16(frame: Any) -> bytes:
    """A decoded frame (av.AudioFrame, s16, mono or interleaved stereo) as 48 kHz
    mono pcm16 bytes; another rate or format is a ``ValueError``."""
    if frame.sample_rate != RATE or frame.format.name != "s16":
        raise ValueError(f"unexpected audio: {frame.format.name} at {frame.sample_rate} Hz")
    samples = np.asarray(frame.to_ndarray(), dtype=np.int16).reshape(-1)
    channels = len(frame.layout.channels)
    return downmix(samples, channels).tobytes()


def downmix(interleaved: Samples, channels: int) -> Samples:
    """Interleaved int16 samples of ``channels`` channels as one channel."""
    if channels == 1:
        return interleaved
    frames = interleaved[: len(interleaved) - len(interleaved) % channels].reshape(-1, channels)
    return np.asarray(frames.mean(axis=1), dtype=np.int16)


def tune_jitter_buffer(receiver: Any) -> None:
    """An audio receiver's jitter buffer without aiortc's prefetch of 4 frames:
    with it, each lost packet cost ~100 ms of audio (measured at 5 % loss: a
    hole held the frames behind it until it was skipped); without, 20-80 ms,
    and 80 ms less latency. (aiortc has no setting for it: its private attribute,
    left alone should a release rename it.)"""
    name = "_RTCRtpReceiver__jitter_buffer"
    if getattr(receiver, "track", None) is not None and receiver.track.kind != "audio":
        return
    if hasattr(receiver, name):
        setattr(receiver, name, JitterBuffer(capacity=JITTER_CAPACITY, prefetch=0))


def gap_samples(expected_pts: int | None, pts: int | None) -> int:
    """Samples of silence standing in for packets lost before a frame at ``pts``
    (so the listener's timeline keeps its length), at most a second's worth."""
    if expected_pts is None or pts is None or pts <= expected_pts:
        return 0
    return min(pts - expected_pts, RATE)


async def pump_track(track: Any, take: Any) -> None:
    """Each frame of the client's track to ``take(bytes)`` until the track ends;
    what was lost before it, as silence."""
    expected: int | None = None
    while True:
        try:
            frame = await track.recv()
        except MediaStreamError:
            return
        try:
            data = mono_pcm16(frame)
        except ValueError:
            continue  # (aiortc's Opus decoder gives s16 at 48 kHz: never, so far)
        lost = gap_samples(expected, frame.pts)
        for start in range(0, lost, FRAME):  # (in frames: one holds at most 200 ms)
            take(bytes(2 * min(FRAME, lost - start)))
        take(data)
        if frame.pts is not None:
            expected = frame.pts + len(data) // 2

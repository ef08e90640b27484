"""A session's input audio (protocol 1.1): the client's binary frames as the
listener's ``Frame``s, and how far ahead of real time a client may send them.

Sans-I/O: the caller passes the time. Frames are raw audio in the format the
client declared (``InputAudio``), decoded and resampled to the listener's rate
by a streaming resampler, so the frames' chunking never changes what the
detector hears; positions count samples at that rate, from the session's first.
"""

from __future__ import annotations

import time

from ..listening.resample import StreamResampler
from ..sources.base import Frame
from ..vocab.audio import pcm16_from_bytes, pcm16_from_ulaw
from .doubler import Doubler
from .protocol import MAX_INPUT_FRAME_S, MIN_INPUT_FRAME_S, InputAudio
from .rate_limit import Verdict

# The most a client's audio may run ahead of real time: a network hiccup's
# backlog arrives at once, a file streamed faster than real time does not.
AUDIO_BURST_S = 1.0
# Audio refused in one episode, beyond which the client is dropped.
AUDIO_PATIENCE_S = 2.0


class BadAudio(ValueError):
    """A binary frame that cannot be the client's audio; one line, safe to send."""


class InputDecoder:
    def __init__(self, declared: InputAudio, rate: int) -> None:
        self.declared = declared
        self.rate = rate
        self.position = 0  # samples at ``rate`` delivered so far
        self._resampler: StreamResampler | Doubler = (
            Doubler()  # a call's 8 kHz to 16 kHz: the same samples, cheaper
            if rate == 2 * declared.sample_rate
            else StreamResampler(declared.sample_rate, rate)
        )
        self._max_bytes = round(MAX_INPUT_FRAME_S * declared.sample_rate) * (
            declared.bytes_per_sample
        )

    def seconds(self, data: bytes) -> float:
        """The audio ``data`` holds, in seconds."""
        return len(data) / self.declared.bytes_per_sample / self.declared.sample_rate

    def check(self, data: bytes) -> None:
        """``BadAudio`` unless ``data`` can be a frame of the declared audio."""
        if not data:
            raise BadAudio("an empty audio frame")
        if len(data) > self._max_bytes:
            raise BadAudio(
                f"an audio frame holds at most {MAX_INPUT_FRAME_S * 1000:.0f} ms "
                f"({self._max_bytes} bytes of {self.declared.encoding} at "
                f"{self.declared.sample_rate} Hz), got {len(data)} bytes"
            )
        if len(data) % self.declared.bytes_per_sample:
            raise BadAudio(f"a pcm16 frame has an even number of bytes, got {len(data)}")

    def decode(self, data: bytes) -> Frame:
        """``data`` (``check``ed) as the next frame at the listener's rate."""
        if self.declared.encoding == "mulaw":
            samples = pcm16_from_ulaw(data)
        else:
            samples = pcm16_from_bytes(data)
        samples = self._resampler.feed(samples)
        frame = Frame(samples, self.rate, self.position, time.perf_counter_ns())
        self.position += len(samples)
        return frame


class AudioBudget:
    """A token bucket of audio seconds, refilled at real time: the client may be
    ``burst_s`` ahead of real time. Audio refused while the client is over the
    limit (until the bucket is full again) is counted; after ``patience_s`` of
    it the client is dropped (see ``RateLimit``: not only refusals in a row).
    A frame is charged at least ``min_frame_s`` (a frame costs the server
    mostly per frame)."""

    def __init__(
        self,
        burst_s: float = AUDIO_BURST_S,
        patience_s: float = AUDIO_PATIENCE_S,
        min_frame_s: float = MIN_INPUT_FRAME_S,
    ) -> None:
        self.burst_s, self.patience_s, self.min_frame_s = burst_s, patience_s, min_frame_s
        self._seconds = burst_s
        self._last: float | None = None
        self._refused = 0.0

    def take(self, seconds: float, now: float) -> Verdict:
        if self._last is not None:
            self._seconds = min(self.burst_s, self._seconds + (now - self._last))
        self._last = now
        if self._seconds >= self.burst_s:
            self._refused = 0.0  # back under the limit for a while
        cost = max(seconds, self.min_frame_s)
        if self._seconds >= cost:
            self._seconds -= cost
            return Verdict.ACCEPT
        first = self._refused == 0.0
        self._refused += cost
        if self._refused > self.patience_s:
            return Verdict.DISCONNECT
        return Verdict.REFUSE if first else Verdict.REFUSE_QUIETLY

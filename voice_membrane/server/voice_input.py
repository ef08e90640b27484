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

# The most a client's audio may run ahead of real time: what a network hiccup
# holds back arrives at once afterwards, and is heard; a file streamed faster
# than real time is not. Sized for a mobile client's worst ordinary hiccup: a
# handover's gap, then a lost TCP segment's retransmission timeout with one
# back-off (1 s, then 2 s: RFC 6298), as measured delay spikes of several
# seconds on mobile networks are (docs/websocket-protocol.md, "Limits").
AUDIO_BURST_S = 3.0
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
    ``burst_s`` ahead of real time, and a frame (frames held back ``burst_s``
    arrive with the one sent as the hold ends). Audio refused while the client
    is over the limit (until the bucket is full again) is counted; after
    ``patience_s`` of it the client is dropped (see ``RateLimit``: not only
    refusals in a row).

    The client's pace, not the server's: ``take`` is told how long the server's
    loop has been stalled in all (``loop_lag.LoopLag.stalled``), and the time of
    a stall may fill the bucket past the burst, since the client's frames of
    that time were waiting in the socket and are read at once; what a stall
    adds lapses as fast as the server runs on unstalled (a real-time client's
    backlog is read far faster), so stalls never add up. A frame is
    charged at least ``min_frame_s`` (a frame costs the server mostly per frame).
    ``now`` and ``stalled`` at creation start the clock (else the first ``take``)."""

    def __init__(
        self,
        burst_s: float = AUDIO_BURST_S,
        patience_s: float = AUDIO_PATIENCE_S,
        min_frame_s: float = MIN_INPUT_FRAME_S,
        *,
        now: float | None = None,
        stalled: float = 0.0,
    ) -> None:
        self.burst_s, self.patience_s, self.min_frame_s = burst_s, patience_s, min_frame_s
        self._full = burst_s + MAX_INPUT_FRAME_S
        self._seconds = self._full
        self._last, self._stalled = now, stalled
        self._refused = 0.0

    def take(self, seconds: float, now: float, stalled: float = 0.0) -> Verdict:
        """A frame of ``seconds`` of audio, read ``now``; ``stalled``: the server
        loop's stalls in all, up to ``now``."""
        if self._last is not None:
            elapsed = now - self._last
            stall = min(elapsed, max(0.0, stalled - self._stalled))
            # A stall's time may fill the bucket past the burst: the client's frames
            # of that time waited in the socket and are read at once. Past it, the
            # server's own time lets what is left of that lapse.
            over = max(0.0, self._seconds - self._full)
            cap = self._full + max(0.0, over + stall - (elapsed - stall))
            self._seconds = min(cap, self._seconds + elapsed)
        self._last, self._stalled = now, stalled
        if self._seconds >= self._full:
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

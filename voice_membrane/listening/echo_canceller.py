"""Acoustic echo cancellation in front of the detector, sans-I/O: the
assistant's audio as it is played (``far``) is the reference whose echo is
taken out of the microphone's audio (``near``) before anything judges it.

Both sides are dated by the caller (``time.perf_counter_ns`` of the audio's
first far sample as it is played, of the last near sample as it is captured):
each is placed on one timeline at the near rate, and every 10 ms block of the
microphone is processed with the far audio played at the same moment (silence
where nothing was), so the echo always comes *after* its reference, by the
room's and the devices' latency, which the engine estimates itself (WebRTC's
AEC3 finds delays up to several hundred ms; measured 20-200 ms in
``benchmarks/aec_candidates.py`` at fca518cb26). A stream whose dates jitter (a device
callback's time) is kept contiguous: a chunk dated within ``_SNAP_S`` of where
the last one ended is placed right after it.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

import numpy as np

from ..vocab.audio import Samples
from .echo_presence import EchoPresence
from .resample import StreamResampler

_SNAP_S = 0.03  # far audio dated closer than this to where the last ended: jitter
_LATE_S = 0.5  # a microphone frame dated later than this past its place: audio was lost
# A microphone timeline running this much late moves back; less is left: moving
# it changes the echo's delay as AEC3 sees it, and a move of 20 ms two seconds
# into an answer left the echo uncancelled until it had measured it again (a
# loaded machine's PulseAudio loopback; offline in tests/test_echo_canceller.py).
# More is not: a call's frames, dated as they arrive, came in bursts that put
# the timeline up to 180 ms late, and with a phone's own 150 ms the echo went
# out of AEC3's reach (tests/test_serve_twilio_echo.py, under load).
_BEHIND_S = 0.05
_AHEAD_S = 10.0  # far audio kept ahead of the microphone (none fed: a listener not running)
ENGINE_RATES = (8000, 16_000, 32_000, 48_000)  # the rates WebRTC's module runs at


class EchoEngine(Protocol):
    """One 10 ms block at a time: the far block played, the near block heard
    (int16, the canceller's rate) → the near block with the echo removed."""

    def process(self, far: Samples, near: Samples) -> Samples: ...


class EchoCanceller:
    def __init__(self, rate: int, engine: EchoEngine) -> None:
        if rate not in ENGINE_RATES:
            raise ValueError(f"echo canceller: {rate} Hz is not one of {ENGINE_RATES}")
        self.rate = rate
        self.block = rate // 100
        self._engine = engine
        self._far: deque[tuple[int, Samples]] = deque()  # (start index, samples), in order
        self._far_end: int | None = None
        self._far_resampler: StreamResampler | None = None
        self._near_next: int | None = None  # timeline index of the next near sample
        self._near_carry: Samples = np.zeros(0, dtype=np.int16)
        self.far_samples = 0  # far audio taken in (at the canceller's rate)
        self.presence = EchoPresence()  # no echo (headphones): the microphone's own audio

    def _index(self, ns: int) -> int:
        return ns * self.rate // 1_000_000_000

    def far(self, samples: Samples, rate: int, at_ns: int, *, steady: bool = False) -> None:
        """``samples`` (int16 at ``rate``) begin to play at ``at_ns``.
        ``steady``: a device's stream, every block played right after the last
        (silence too), its dates the callback's, late when the callback ran late
        (a loaded machine): a date up to ``_LATE_S`` past where the last block
        ended is taken as there, as the microphone's are."""
        if self._far_resampler is None or self._far_resampler.src_rate != rate:
            self._far_resampler = StreamResampler(rate, self.rate)
        samples = self._far_resampler.feed(np.asarray(samples, dtype=np.int16))
        if not len(samples):
            return
        start = self._index(at_ns)
        end = self._far_end
        late = _LATE_S if steady else _SNAP_S
        if end is not None and end - _SNAP_S * self.rate <= start <= end + late * self.rate:
            start = end
        elif end is not None and start < end:  # (overlaps what is placed: keep the newest)
            while self._far and self._far[-1][0] >= start:
                self._far.pop()
            if self._far:
                at, last = self._far[-1]
                self._far[-1] = (at, last[: start - at])
        self._far.append((start, samples))
        self._far_end = start + len(samples)
        while self._far and self._far_end - self._far[0][0] > _AHEAD_S * self.rate:
            self._far.popleft()
        self.far_samples += len(samples)

    def near(self, samples: Samples, end_ns: int) -> Samples:
        """The microphone's ``samples``, the last captured at ``end_ns``, with
        the echo removed: the whole 10 ms blocks so far (a rest waits for the
        next call, so the output may be up to one block shorter or longer)."""
        samples = np.asarray(samples, dtype=np.int16)
        start = self._index(end_ns) - len(samples)
        expected = None if self._near_next is None else self._near_next + len(self._near_carry)
        # A frame dated later than its place is one that came late (a busy
        # loop, a network): its audio is still contiguous with the last. One
        # dated earlier shows the timeline itself runs late (its first frames
        # came late, or in a burst): it moves back past _BEHIND_S (why not
        # sooner: there). Past _LATE_S, audio was lost: the timeline restarts.
        if expected is None or start > expected + _LATE_S * self.rate:
            self._near_next, self._near_carry = start, np.zeros(0, dtype=np.int16)
        elif start < expected - _BEHIND_S * self.rate:
            assert self._near_next is not None
            self._near_next -= expected - start
        buf = np.concatenate([self._near_carry, samples])
        n = len(buf) // self.block * self.block
        assert self._near_next is not None
        out = np.empty(n, dtype=np.int16)
        for i in range(0, n, self.block):
            at = self._near_next + i
            far, near = self._far_block(at), buf[i : i + self.block]
            cleaned = self._engine.process(far, near)  # (always: converged when an echo comes)
            out[i : i + self.block] = cleaned if self.presence.feed(far, near) else near
        self._near_next += n
        self._near_carry = buf[n:]
        self._drop_far_before(self._near_next)
        return out

    def _far_block(self, at: int) -> Samples:
        out = np.zeros(self.block, dtype=np.int16)
        for start, samples in self._far:
            if start >= at + self.block:
                break
            lo, hi = max(at, start), min(at + self.block, start + len(samples))
            if lo < hi:
                out[lo - at : hi - at] = samples[lo - start : hi - start]
        return out

    def _drop_far_before(self, index: int) -> None:
        while self._far and self._far[0][0] + len(self._far[0][1]) <= index:
            self._far.popleft()

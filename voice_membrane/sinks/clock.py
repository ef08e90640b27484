"""The playback timeline of a sink with no device to ask what it has played: a
clock stands in for one (the real-time null sink, the socket sink of ``serve``).
"""

from __future__ import annotations

import time

import anyio


class PlaybackClock:
    """What a sink has written, when it ends, what has played and when the
    current utterance's first sample played, read off ``time.perf_counter_ns()``
    as if a device took every sample the moment it was due.

    Audio is played back to back from the end of what was written; on an idle
    timeline (a new utterance, or an underrun) it starts at the next block's
    start when the timeline has blocks of ``block_ns`` (ticking from ``open``:
    a device callback's), else at once. The sink calls ``begin_write`` on each
    ``write``, ``wait_played`` (or ``end_utterance``) on ``drain`` and ``stop``
    on ``stop``, and hands ``played_seconds`` and ``first_played_ns`` on.
    """

    def __init__(self, block_ns: int = 0) -> None:
        self.block_ns = block_ns
        self._opened_ns = 0
        self._ends_ns = 0  # when the audio written so far has finished playing
        self._written = 0.0  # seconds written and not discarded
        self._played = 0.0  # latest played_seconds, so it never decreases
        self._utterance_open = False  # a write since open / the last drain or stop
        self._first_ns: int | None = None  # may lie ahead: the time its audio starts
        self._paused_ns: int | None = None  # the timeline stands still from here
        self._resumed = anyio.Event()

    @property
    def ends_ns(self) -> int:
        """When the audio written so far has finished playing."""
        return self._ends_ns

    @property
    def paused(self) -> bool:
        return self._paused_ns is not None

    def now(self) -> int:
        """The timeline's present: the wall clock, or where a pause holds it."""
        return self._paused_ns if self._paused_ns is not None else time.perf_counter_ns()

    def open(self) -> None:
        self._opened_ns = self._ends_ns = time.perf_counter_ns()
        self._written = self._played = 0.0
        self._utterance_open = False
        self._first_ns = None
        self.resume()

    def pause(self) -> None:
        if self._paused_ns is None:
            self._paused_ns = time.perf_counter_ns()
            self._resumed = anyio.Event()

    def resume(self) -> None:
        """Play on from where the pause held the timeline."""
        paused, self._paused_ns = self._paused_ns, None
        if paused is None:
            return
        held = time.perf_counter_ns() - paused
        if self._ends_ns > paused:
            self._ends_ns += held
        if self._first_ns is not None and self._first_ns >= paused:  # not played yet
            self._first_ns += held
        self._resumed.set()

    async def wait_resumed(self) -> None:
        """Return at once unless paused; else when ``resume`` or ``stop`` ends it."""
        while self._paused_ns is not None:
            await self._resumed.wait()

    def begin_write(self) -> None:
        """A write begins: the first since ``open``, ``drain`` or ``stop`` starts a
        new utterance, whose first sample has not played yet."""
        if not self._utterance_open:
            self._utterance_open = True
            self._first_ns = None

    def play(self, seconds: float, now: int) -> None:
        """``seconds`` of audio written at ``now``, to play after what was written."""
        if self._paused_ns is not None:
            now = min(now, self._paused_ns)  # it queues behind what the pause holds
        start = self._ends_ns
        if start <= now:  # idle (a new utterance, or an underrun)
            start = now + (self._opened_ns - now) % self.block_ns if self.block_ns else now
        if self._first_ns is None:
            self._first_ns = start
        self._ends_ns = start + round(seconds * 1e9)
        self._written += seconds

    def play_at_once(self, seconds: float, now: int) -> None:
        """``seconds`` of audio written at ``now`` and played in no time (a sink
        that is not real time): the timeline's end does not move."""
        if self._first_ns is None:
            self._first_ns = now
        self._written += seconds

    async def wait_played(self) -> None:
        """Wait until everything written has played (a pause waits for its
        ``resume``); that ends the utterance."""
        while True:
            await self.wait_resumed()
            await anyio.sleep(max(0.0, (self._ends_ns - time.perf_counter_ns()) / 1e9))
            if self._paused_ns is None:
                break
        self.end_utterance()

    def end_utterance(self) -> None:
        self._utterance_open = False

    def stop(self) -> None:
        """Discard what has not played yet; that ends the utterance (and a pause)."""
        self.resume()
        now = time.perf_counter_ns()
        self._written = self.played_seconds
        self._ends_ns = min(self._ends_ns, now)
        if self._first_ns is not None and self._first_ns > now:
            self._first_ns = None  # discarded before it started playing
        self._utterance_open = False

    @property
    def played_seconds(self) -> float:
        """Seconds whose playing time has passed, since ``open``; never decreases."""
        pending = max(0, self._ends_ns - self.now()) / 1e9
        self._played = max(self._played, self._written - pending)
        return self._played

    @property
    def first_played_ns(self) -> int | None:
        """When the current utterance's first sample played; None until then."""
        first = self._first_ns
        if first is None:
            return None
        if self._paused_ns is not None:  # a sample due at the pause did not play
            return first if first < self._paused_ns else None
        return first if first <= time.perf_counter_ns() else None

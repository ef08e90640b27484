"""How long this process's event loop was too busy to read its sockets.

A heartbeat is due every ``TICK_S``; how late it runs is time the loop spent on
other work (a blocking call, a CPU-bound stretch, the process descheduled), and
meanwhile no socket was read: every client's frames of that time wait in the
kernel and are read at once afterwards. The audio budget credits it
(``voice_input.AudioBudget``), so a server that falls behind does not take its
own backlog for a client sending faster than real time.

``LoopLag`` is sans-I/O (the caller passes the times); ``Heartbeat`` runs it on
the asyncio loop, one timer a process (no task: a callback re-arming itself),
and only while a session takes audio in (``hold``/``release``): only the
audio budget reads the lag, and on an idle or typing server the timer's 20
wake-ups a second were about a sixth of one session's CPU (docs/serve.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

TICK_S = 0.05


def loop_clock() -> Callable[[], float]:
    """The running loop's clock: ``anyio.current_time`` as a served loop's is
    (websockets' server runs on asyncio), at a sixth of its cost, for what reads
    it on every audio frame."""
    return asyncio.get_running_loop().time


class LoopLag:
    def __init__(self) -> None:
        self._late = 0.0  # the beats run so far: how late, in all
        self._due: float | None = None  # the next beat's time

    def expect(self, at: float) -> None:
        """The next beat is due ``at``."""
        self._due = at

    def beat(self, now: float) -> None:
        """The beat due runs ``now`` (no beat is due until the next ``expect``)."""
        if self._due is not None:
            self._late += max(0.0, now - self._due)
            self._due = None

    def stalled(self, now: float) -> float:
        """Seconds the loop has been behind, in all, up to ``now``: never less than
        before. While the beat is overdue, how overdue it is counts too: a stall
        still going on (the session reading its backlog may run before the beat)."""
        overdue = 0.0 if self._due is None else max(0.0, now - self._due)
        return self._late + overdue


class Heartbeat:
    """``lag``'s beats on the running asyncio loop while anything holds it."""

    def __init__(self, lag: LoopLag, tick_s: float = TICK_S) -> None:
        self.lag, self.tick_s = lag, tick_s
        self._holders = 0
        self._handle: asyncio.TimerHandle | None = None

    @property
    def running(self) -> bool:
        return self._handle is not None

    def hold(self) -> None:
        """A session that takes audio in: beat until it ``release``s (the first
        holder starts the beats)."""
        self._holders += 1
        if self._handle is None:
            self._arm(asyncio.get_running_loop())

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """``hold`` for the block's time."""
        self.hold()
        try:
            yield
        finally:
            self.release()

    def release(self) -> None:
        """One ``hold`` over: the last one stops the beats."""
        self._holders = max(0, self._holders - 1)
        if self._holders == 0:
            self.stop()

    def stop(self) -> None:
        """No more beats, whoever holds it (the server closing)."""
        self._holders = 0
        if self._handle is not None:
            self._handle.cancel()
            self.lag.beat(self._handle.when())  # no beat is due any more
            self._handle = None

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        at = loop.time() + self.tick_s
        self.lag.expect(at)
        self._handle = loop.call_at(at, self._beat, loop)

    def _beat(self, loop: asyncio.AbstractEventLoop) -> None:
        self.lag.beat(loop.time())
        self._arm(loop)

"""A session's message rate limit (sans-I/O: the caller passes the time).

A token bucket of ``per_second`` tokens refilled at ``per_second`` a second:
more than that many messages in any second are a flood. A flood lasts until
the bucket is full again (the client kept under the rate for a while): its
refused messages are counted, the client is told once, and one that goes on
flooding for ``patience`` more messages is dropped. (Counting only refusals in
a row would let a flooder on a loaded server, whose messages are taken slowly
enough for a token to refill now and then, be told again and again and never
be dropped.)
"""

from __future__ import annotations

from enum import Enum


class Verdict(Enum):
    ACCEPT = "accept"
    REFUSE = "refuse"  # dropped; tell the client (once per flood)
    REFUSE_QUIETLY = "refuse_quietly"  # dropped; the client was told already
    DISCONNECT = "disconnect"


class RateLimit:
    def __init__(self, per_second: int, patience: int | None = None) -> None:
        self.per_second = per_second
        self.patience = per_second if patience is None else patience
        self._tokens = float(per_second)
        self._last: float | None = None
        self._refused = 0  # in the current flood

    def check(self, now: float) -> Verdict:
        if self._last is not None:
            self._tokens = min(
                float(self.per_second), self._tokens + (now - self._last) * self.per_second
            )
        self._last = now
        if self._tokens >= self.per_second:
            self._refused = 0  # the flood (if any) is over
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return Verdict.ACCEPT
        self._refused += 1
        if self._refused > self.patience:
            return Verdict.DISCONNECT
        return Verdict.REFUSE if self._refused == 1 else Verdict.REFUSE_QUIETLY

"""A session's message rate limit (sans-I/O: the caller passes the time).

A token bucket of ``per_second`` tokens refilled at ``per_second`` a second:
more than that many messages in any second are a flood. Messages refused in a
row are counted; a client that goes on flooding for ``patience`` more messages
after it was told is dropped.
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
        self._refused = 0  # in a row

    def check(self, now: float) -> Verdict:
        if self._last is not None:
            self._tokens = min(
                float(self.per_second), self._tokens + (now - self._last) * self.per_second
            )
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            self._refused = 0
            return Verdict.ACCEPT
        self._refused += 1
        if self._refused > self.patience:
            return Verdict.DISCONNECT
        return Verdict.REFUSE if self._refused == 1 else Verdict.REFUSE_QUIETLY

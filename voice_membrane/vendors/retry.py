"""The one retry policy for provider calls (LLM and TTS services).

The SDKs' own retries are turned off so that exactly one policy decides: a
retryable ``ProviderError`` (429, 5xx, a dropped or refused connection) raised
before the call produced any output is retried with exponential backoff and
jitter, honouring the server's ``retry-after``. Once output has arrived a retry
would repeat it, so the error ends the reply instead (``Membrane`` does that).

Over all of that sits one deadline for the call's first output
(``FirstTokenDeadline``): a server that accepts and never answers would
otherwise keep a turn silent for every attempt's HTTP timeout and the waits
between them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from .errors import ProviderError


class Retryable(Protocol):
    """An error the policy can judge: a provider's (LLM) or a TTS service's."""

    @property
    def retryable(self) -> bool: ...

    @property
    def retry_after_s(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``max_retries`` retries after the first attempt; delay ``base_delay_s·2^n``
    (n = 0, 1, …) scaled by ±``jitter``, capped at ``max_delay_s``; a
    ``retry-after`` from the server replaces the computed delay (still capped)."""

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    jitter: float = 0.25

    def delay_s(self, retry: int, error: Retryable, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        if error.retry_after_s is not None:
            return min(error.retry_after_s, self.max_delay_s)
        draw = rng.random() if rng is not None else random.random()
        backoff = self.base_delay_s * 2.0**retry
        spread = 1 + self.jitter * (2 * draw - 1)
        return min(backoff * spread, self.max_delay_s)

    def should_retry(self, retry: int, error: Retryable) -> bool:
        return error.retryable and retry < self.max_retries


NO_RETRY = RetryPolicy(max_retries=0)


@dataclass(frozen=True, slots=True)
class FirstTokenDeadline:
    """The moment (on the event loop's clock) by which a call's first output must
    have arrived, across every attempt and backoff wait; ``at=None``: no deadline."""

    seconds: float | None
    at: float | None

    @classmethod
    def starting(cls, seconds: float | None, now: float) -> FirstTokenDeadline:
        return cls(seconds, None if seconds is None else now + seconds)

    def passed(self, now: float) -> bool:
        return self.at is not None and now >= self.at

    def allows_wait(self, delay_s: float, now: float) -> bool:
        """Whether a retry after ``delay_s`` would still start before the deadline."""
        return self.at is None or now + delay_s < self.at

    def error(self, provider: str, attempts: int, last: ProviderError | None) -> ProviderError:
        """The error that ends the reply when the deadline passes (or would, before
        the next attempt could start)."""
        tried = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        why = f"; last error: {last}" if last is not None else ""
        return ProviderError(
            provider,
            "timeout",
            f"no output within the first-token deadline of {self.seconds:g} s ({tried}{why})",
        )

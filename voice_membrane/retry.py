"""The one retry policy for provider calls.

The SDKs' own retries are turned off so that exactly one policy decides: a
retryable ``ProviderError`` (429, 5xx, a dropped or refused connection) raised
before the call produced any output is retried with exponential backoff and
jitter, honouring the server's ``retry-after``. Once output has arrived a retry
would repeat it, so the error ends the reply instead (``Membrane`` does that).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .providers.base import ProviderError


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``max_retries`` retries after the first attempt; delay ``base_delay_s·2^n``
    (n = 0, 1, …) scaled by ±``jitter``, capped at ``max_delay_s``; a
    ``retry-after`` from the server replaces the computed delay (still capped)."""

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    jitter: float = 0.25

    def delay_s(self, retry: int, error: ProviderError, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        if error.retry_after_s is not None:
            return min(error.retry_after_s, self.max_delay_s)
        draw = rng.random() if rng is not None else random.random()
        backoff = self.base_delay_s * 2.0**retry
        spread = 1 + self.jitter * (2 * draw - 1)
        return min(backoff * spread, self.max_delay_s)

    def should_retry(self, retry: int, error: ProviderError) -> bool:
        return error.retryable and retry < self.max_retries


NO_RETRY = RetryPolicy(max_retries=0)

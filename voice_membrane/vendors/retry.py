"""The one retry policy for provider calls (LLM and TTS services).

The SDKs' own retries are turned off so that exactly one policy decides: a
retryable ``ProviderError`` (429, 5xx, a dropped or refused connection) raised
before the call produced any output is retried with exponential backoff and
jitter, honouring the server's ``retry-after``. Once output has arrived a retry
would repeat it, so the error ends the reply instead (``Membrane`` does that).

Over all of that sits one deadline for the call's first output
(``FirstTokenDeadline``): a server that accepts and never answers would
otherwise keep a turn silent for every attempt's HTTP timeout and the waits
between them. Once the call has begun, ``StallDeadline`` bounds the wait for
each next piece of it: a stream that stops mid-reply (or sends only
keep-alives, which reset the HTTP read timeout) would otherwise hold the turn
for that timeout. A stall comes after output, so it is never retried.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from ..vocab.provider_output import NativeDelta, ProviderOutput, StrayDelta, TextDelta, Usage
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


@dataclass(slots=True)
class StallDeadline:
    """The longest a call that has begun may wait for its next progress: a delta
    with text (thinking and a tool call's input count), a block's start or end,
    an image, the stop. A usage count or an empty delta (what a keep-alive looks
    like once read) is no progress. Counted over the time spent waiting on the
    stream only: what the consumer takes between two outputs is not the
    stream's stall. ``seconds=None``: no deadline."""

    seconds: float | None
    waited_s: float = 0.0  # waiting since the last progress
    progress: int = 0  # outputs that were progress; the call has begun at the first
    deltas: int = 0  # of them, deltas with text (for the message)

    def budget(self) -> float:
        """Seconds the next wait may last before the call has stalled."""
        assert self.seconds is not None
        return self.seconds - self.waited_s

    def note(self, output: ProviderOutput) -> bool:
        """``output`` arrived: whether it was progress (which restarts the count;
        the caller adds a wait that ended without progress to ``waited_s``)."""
        if isinstance(output, TextDelta | NativeDelta | StrayDelta):
            if not output.text:
                return False
            self.deltas += 1
        elif isinstance(output, Usage):
            return False
        self.waited_s = 0.0
        self.progress += 1
        return True

    def error(self, provider: str) -> ProviderError:
        """The error that ends the reply when the deadline passes."""
        n = self.deltas
        return ProviderError(
            provider,
            "stalled",
            f"the stream stopped: nothing new for {self.seconds:g} s after "
            f"{n} delta{'s' if n != 1 else ''} (what came before is kept)",
        )

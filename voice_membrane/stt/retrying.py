"""One retry of an utterance's transcription that failed before any transcript,
for every engine (``RetryingStt`` wraps one).

A retryable ``SttError`` (429, 5xx, a refused or dropped connection, a stall)
raised while opening, pushing, finalizing or reading, before the stream gave
its first transcript (partial or final), opens a new stream after the policy's
delay (the service's ``retry-after`` first, capped) and pushes it the audio
heard so far again, then ``finalize()`` if the caller had. Once a transcript
has come out a retry could make the caller hear half an utterance twice, so the
error goes on. The audio kept for a replay is bounded (``max_replay_s``): past
it, the stream stops keeping audio and a failure is not retried.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Self

import anyio
import numpy as np

from ..vendors.retry import RetryPolicy
from ..vocab.audio import Samples
from ..vocab.transcripts import Transcript
from .base import SttEngine, SttError, SttStream, tell_paused

ONE_RETRY = RetryPolicy(max_retries=1, base_delay_s=0.2, max_delay_s=2.0)


class RetryingStt:
    """``engine`` with a retry before the first transcript of each utterance;
    ``on_retry(error, delay_s)`` hears of each (to tell the user)."""

    def __init__(
        self,
        engine: SttEngine,
        policy: RetryPolicy = ONE_RETRY,
        *,
        max_replay_s: float = 30.0,
        on_retry: Callable[[SttError, float], None] = lambda error, delay_s: None,
    ) -> None:
        self.engine, self.policy, self.on_retry = engine, policy, on_retry
        self.name, self.sample_rate, self.local = engine.name, engine.sample_rate, engine.local
        self._max_samples = int(max_replay_s * engine.sample_rate)

    async def start(self) -> None:
        await self.engine.start()

    def stream(self) -> RetryingStream:
        return RetryingStream(self)

    async def aclose(self) -> None:
        await self.engine.aclose()


class RetryingStream:
    """The inner stream of the current attempt, replaced while nothing came out."""

    def __init__(self, owner: RetryingStt) -> None:
        self._owner = owner
        self._inner: SttStream | None = None
        self._attempt = 0  # bumped each time the inner stream is replaced
        self._retries = 0
        self._kept: list[Samples] = []  # pushed audio, for a replay
        self._kept_samples = 0
        self._replayable = True
        self._produced = self._finalized = False
        self._lock = anyio.Lock()  # one open-and-replay at a time, pushes in order

    async def __aenter__(self) -> Self:
        async with self._lock:
            await self._open()
        return self

    async def push(self, samples: Samples) -> None:
        async with self._lock:
            self._keep(samples)
            attempt = self._attempt
            try:
                await self._current().push(samples)
            except SttError as error:
                await self._recover(error, attempt)  # the replay includes ``samples``

    async def speech_paused(self, paused: bool) -> None:
        """Passed on to the attempt's stream; a hint, so a failed one is ignored
        here (the next push or finalize recovers or reports it)."""
        async with self._lock:
            with contextlib.suppress(SttError):
                await tell_paused(self._current(), paused)

    async def finalize(self) -> None:
        async with self._lock:
            if self._finalized:
                return
            self._finalized = True
            attempt = self._attempt
            try:
                await self._current().finalize()
            except SttError as error:
                await self._recover(error, attempt)

    async def transcripts(self) -> AsyncIterator[Transcript]:
        while True:
            attempt, inner = self._attempt, self._inner
            assert inner is not None
            try:
                async for transcript in inner.transcripts():
                    if not self._produced:
                        self._produced = True
                        self._kept, self._replayable = [], False  # never replayed now
                    yield transcript
                if attempt == self._attempt:
                    return
                # else a push or finalize replaced the stream under us: read the new one
            except SttError as error:
                async with self._lock:
                    await self._recover(error, attempt)

    def _current(self) -> SttStream:
        """The attempt's stream; ``SttError`` once it failed for good (a push
        that races the reader's report of the failure)."""
        if self._inner is None:
            raise SttError("the speech-to-text stream failed and was closed")
        return self._inner

    def _keep(self, samples: Samples) -> None:
        if not self._replayable:
            return
        self._kept_samples += len(samples)
        if self._kept_samples > self._owner._max_samples:
            self._kept, self._replayable = [], False
        else:
            self._kept.append(samples)

    async def _recover(self, error: SttError, attempt: int) -> None:
        """Replace the stream that failed with ``error`` (unless another caller
        already did, after the same failure), or raise ``error``."""
        if attempt != self._attempt:
            return  # replaced already: the caller goes on with the new stream
        policy = self._owner.policy
        if self._produced or not self._replayable or not policy.should_retry(self._retries, error):
            raise error
        delay_s = policy.delay_s(self._retries, error)
        self._owner.on_retry(error, delay_s)
        self._retries += 1
        await self._close_inner()
        await anyio.sleep(delay_s)
        await self._open()
        assert self._inner is not None
        try:
            if self._kept:
                await self._inner.push(np.concatenate(self._kept))
            if self._finalized:
                await self._inner.finalize()
        except SttError as again:
            await self._recover(again, self._attempt)

    async def _open(self) -> None:
        while True:
            inner = self._owner.engine.stream()
            try:
                await inner.__aenter__()
            except SttError as error:
                policy = self._owner.policy
                if not policy.should_retry(self._retries, error):
                    raise
                delay_s = policy.delay_s(self._retries, error)
                self._owner.on_retry(error, delay_s)
                self._retries += 1
                await anyio.sleep(delay_s)
                continue
            self._inner = inner
            self._attempt += 1
            return

    async def _close_inner(self) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            # It failed already: its error is the one being handled.
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await inner.__aexit__(None, None, None)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            await inner.__aexit__(exc_type, exc, tb)

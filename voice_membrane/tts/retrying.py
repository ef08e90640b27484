"""Retrying a TTS request that failed before any audio, with the LLM half's policy.

A retryable ``TtsError`` (429, 5xx, a refused or dropped connection) raised
before the request produced anything is tried again after the policy's backoff
(the service's ``retry-after`` first); once audio has come out a retry would
repeat it, so the error goes on to the caller. Each retry's ``kind`` is noted in
the list ``counting_retries`` gave the calling task (a turn's TTS stage: its
report's ``tts_stream.retries``), whichever engine retried.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import aclosing, contextmanager
from contextvars import ContextVar
from typing import TypeVar

import anyio

from ..vendors.retry import RetryPolicy
from .base import TtsError

T = TypeVar("T")

# Set by the task that opens a turn's stream; the stream's own tasks inherit it.
_retries: ContextVar[list[str] | None] = ContextVar("tts_retries", default=None)


@contextmanager
def counting_retries(into: list[str]) -> Iterator[None]:
    """Within: each TTS retry appends its error's kind to ``into``."""
    token = _retries.set(into)
    try:
        yield
    finally:
        _retries.reset(token)


def _note(error: TtsError) -> None:
    if (into := _retries.get()) is not None:
        into.append(error.kind)


async def retry_before_output(
    attempt: Callable[[], AsyncGenerator[T, None]],
    policy: RetryPolicy,
    on_retry: Callable[[TtsError, float], None] = lambda error, delay_s: None,
) -> AsyncGenerator[T, None]:
    """The items of ``attempt()``, started again while it fails retryably before
    its first item; ``on_retry(error, delay_s)`` hears of each retry."""
    retry = 0
    while True:
        produced = False
        try:
            async with aclosing(attempt()) as items:
                async for item in items:
                    produced = True
                    yield item
            return
        except TtsError as error:
            if produced or not policy.should_retry(retry, error):
                raise
            delay_s = policy.delay_s(retry, error)
            _note(error)
            on_retry(error, delay_s)
            await anyio.sleep(delay_s)
            retry += 1


async def retry_call(call: Callable[[], Awaitable[T]], policy: RetryPolicy) -> T:
    """``await call()``, called again while it fails retryably (a request with no
    streamed output: a voice lookup, a socket handshake)."""
    retry = 0
    while True:
        try:
            return await call()
        except TtsError as error:
            if not policy.should_retry(retry, error):
                raise
            _note(error)
            await anyio.sleep(policy.delay_s(retry, error))
            retry += 1

"""The event loop's side of a local engine's stream: the transcripts (or the
error) its worker thread hands over, read back in order by ``transcripts()``."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..vocab.transcripts import Transcript
from .base import SttError

END = None  # marks the end of a stream's transcripts


class Results:
    def __init__(self) -> None:
        self._out: deque[Transcript | None] = deque()
        self._ready = asyncio.Event()
        self.error: SttError | None = None

    def deliver(self, items: list[Transcript | None]) -> None:
        if self._out and self._out[-1] is END:
            return  # closed or settled: nothing after the end
        self._out.extend(items)
        self._ready.set()

    def fail(self, error: SttError) -> None:
        self.error = error
        self._ready.set()

    async def read(self) -> AsyncIterator[Transcript]:
        while True:
            while not self._out:
                if self.error is not None:
                    raise self.error
                self._ready.clear()
                await self._ready.wait()
            item = self._out.popleft()
            if item is END:
                return
            yield item


def call_in_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    """From the worker thread: run ``fn(*args)`` on the loop (if it still runs)."""
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody reads
        loop.call_soon_threadsafe(fn, *args)

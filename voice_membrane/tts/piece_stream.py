"""Piece-at-a-time engines as a turn stream: the one adapter.

An engine that speaks one piece per call (Piper, espeak-ng, an HTTP service)
subclasses ``PieceEngine`` and implements ``synthesize``; ``open_stream`` wraps
it in a ``PieceStream``. Up to ``max_in_flight`` pieces are synthesized at once
(an HTTP engine's next request overlaps the previous piece's playback; a local
engine does one at a time, as it competes for the same CPU), each into its own
small buffer, and the audio comes out strictly in text order. An error is
raised in its piece's place, after the audio of the pieces before it.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from contextlib import aclosing
from types import TracebackType
from typing import Self

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..vocab.audio import AudioChunk
from .base import StreamStats, TtsError, TtsStream, Voiced

# Audio chunks held per piece before its synthesis waits: enough to run ahead
# of playback, little to throw away when the turn is interrupted.
PIECE_AUDIO_BUFFER = 16
# Text of earlier pieces given as context (``previous_text``): the last sentences.
CONTEXT_CHARS = 300


class PieceEngine(ABC):
    """Base of the engines that speak one piece per ``synthesize`` call."""

    name: str
    sample_rate: int
    local: bool = True
    billed: bool = False  # a paid service: characters sent are counted as billed
    max_in_flight: int = 1

    async def start(self) -> None:
        return None

    @abstractmethod
    def synthesize(self, text: str, previous_text: str = "") -> AsyncGenerator[AudioChunk, None]:
        """Yield the audio of ``text`` as it is produced, first chunk as early as
        possible. ``previous_text``: what this turn said before it, for engines
        that keep prosody across pieces (others ignore it). If the caller stops
        early (an interruption), the engine stays usable and leaks nothing."""

    async def aclose(self) -> None:
        return None

    def open_stream(self) -> TtsStream:
        return PieceStream(self)


_Item = Voiced | TtsError


class PieceStream:
    """A turn's stream over a ``PieceEngine`` (see the module docstring)."""

    def __init__(self, engine: PieceEngine) -> None:
        self.engine = engine
        self.stats = StreamStats()
        self._limit = anyio.Semaphore(max(1, engine.max_in_flight))
        self._texts: list[str] = []
        self._order_send, self._order_recv = anyio.create_memory_object_stream[
            MemoryObjectReceiveStream[_Item]
        ](math.inf)
        self._current: MemoryObjectReceiveStream[_Item] | None = None  # the piece being read
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> Self:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()  # whatever still runs was not waited for
        self._order_send.close()
        self._order_recv.close()
        if self._current is not None:
            self._current.close()
        await self._tg.__aexit__(exc_type, exc, tb)

    async def push(self, text: str) -> None:
        assert self._tg is not None, "use the stream in an async with block"
        index = len(self._texts)
        previous = "".join(self._texts)[-CONTEXT_CHARS:]
        self._texts.append(text)
        # No checkpoint unless it must wait (max_in_flight pieces synthesizing): a
        # yield here lets the LLM's tasks run before this piece's request starts.
        try:
            self._limit.acquire_nowait()
        except anyio.WouldBlock:
            await self._limit.acquire()
        audio_send, audio_recv = anyio.create_memory_object_stream[_Item](PIECE_AUDIO_BUFFER)
        self._order_send.send_nowait(audio_recv)  # unbounded
        self._tg.start_soon(self._synthesize, index, text, previous, audio_send)

    async def end_input(self) -> None:
        self._order_send.close()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Voiced:
        while True:
            if self._current is None:
                try:
                    self._current = await self._order_recv.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    raise StopAsyncIteration from None
            try:
                item = await self._current.receive()
            except anyio.EndOfStream:
                self._current.close()
                self._current = None
                continue
            if isinstance(item, TtsError):
                raise item
            return item

    async def _synthesize(
        self, index: int, text: str, previous: str, out: MemoryObjectSendStream[_Item]
    ) -> None:
        engine = self.engine
        done = False
        try:
            async with out:
                started = time.perf_counter_ns()
                failed: TtsError | None = None
                first = True
                try:
                    async with aclosing(engine.synthesize(text, previous)) as chunks:
                        async for chunk in chunks:
                            if first and engine.billed:  # a refused request is not billed
                                self.stats.chars_billed += len(text)
                            first = False
                            now = time.perf_counter_ns()
                            self.stats.busy_ns += now - started
                            await out.send(Voiced(index, chunk, t_ns=now))
                            started = time.perf_counter_ns()
                except TtsError as error:
                    failed = error  # said in its place, after the audio before it
                done = True
                if failed is not None:
                    await out.send(failed)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the reader left: the turn ended early
        finally:
            if not done:
                self.stats.cancelled_requests += 1
            self._limit.release()

"""A listener's queue of inputs: many putters, one taker.

A served listener takes a frame 50 times a second per caller, so the queue is
on the hottest path of a served process. An anyio memory object stream pays,
per wait, a checkpoint (one more pass of the event loop), an ``Event`` and a
record of the waiting task; here a take that finds nothing waits on one
future, and a put only wakes it (about a third of the CPU per frame, measured
in docs/listening.md). The items stay in the queue until taken, so a taker
cancelled while it waits loses nothing.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel

T = TypeVar("T")


class Inbox(Generic[T]):
    """``put_nowait`` (never waits: ``anyio.WouldBlock`` when ``capacity``
    items wait), ``await put`` (a checkpoint, then waits for room), ``take_nowait`` / ``await
    take`` for the one taker; ``close`` refuses later puts
    (``anyio.ClosedResourceError``) and fails waiting ones."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an inbox holds at least one item, not {capacity}")
        self._capacity = capacity
        self._items: deque[T] = deque()
        self._taker: asyncio.Future[None] | None = None
        self._putters: deque[asyncio.Future[None]] = deque()
        self._closed = False
        # An item put for a waiting taker is its, not the queue's (as a memory
        # stream hands it over): one more fits until the taker takes it.
        self._handed = 0

    def __len__(self) -> int:
        return len(self._items)

    def put_nowait(self, item: T, *, bounded: bool = True) -> None:
        """``bounded=False``: past the capacity (a rare item that must not be lost)."""
        if self._closed:
            raise anyio.ClosedResourceError
        if bounded and len(self._items) >= self._capacity + self._handed:
            raise anyio.WouldBlock
        self._items.append(item)
        taker = self._taker
        if taker is not None and not taker.done():
            taker.set_result(None)
            self._handed = 1

    async def put(self, item: T) -> None:
        """As a memory stream's ``send``: a checkpoint first (a source read as
        fast as it goes lets the STT's readers in between its frames), then
        room."""
        await anyio.lowlevel.checkpoint()
        while len(self._items) >= self._capacity + self._handed and not self._closed:
            room = asyncio.get_running_loop().create_future()
            self._putters.append(room)
            try:
                await room
            finally:
                if room in self._putters:  # (cancelled: it never got room)
                    self._putters.remove(room)
        self.put_nowait(item)

    def take_nowait(self) -> T:
        if not self._items:
            raise anyio.WouldBlock
        item = self._items.popleft()
        self._handed = 0
        while self._putters:
            room = self._putters.popleft()
            if not room.done():
                room.set_result(None)
                break
        return item

    async def take(self) -> T:
        while not self._items:
            self._taker = asyncio.get_running_loop().create_future()
            try:
                await self._taker
            finally:
                self._taker = None
        return self.take_nowait()

    def close(self) -> None:
        self._closed = True
        while self._putters:
            room = self._putters.popleft()
            if not room.done():
                room.set_result(None)  # it finds the inbox closed

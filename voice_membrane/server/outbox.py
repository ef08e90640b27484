"""A session's bounded send queue: everything the server sends a client, in order.

One task (the connection's sender) takes items off and writes them to the
socket; producers (the turn, the message loop) put items without waiting. A
client that does not read stalls the sender, the queue grows, and once it
holds more than its bound the producer is told (``put`` returns False): the
session drops that client rather than buffer without end or block anyone.
Audio and events are bounded separately: a turn's hidden blocks may come in a
burst of many small events, while audio arrives at playback pace, so a backlog
of audio means the client has stopped keeping up.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

import anyio


@dataclass(frozen=True, slots=True)
class Audio:
    turn: int
    # The whole binary frame, header included; or a text message that travels as
    # audio (a Twilio call's media and marks, dropped with it on an interruption).
    data: bytes | str


@dataclass(frozen=True, slots=True)
class Close:
    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class Barrier:
    """What comes after it waits until ``passed`` is set (or ``most_s`` went by)."""

    passed: anyio.Event
    most_s: float


Item = str | Audio | Close | Barrier


class Outbox:
    def __init__(self, max_audio: int, max_events: int, max_event_chars: int | None = None) -> None:
        self.max_audio, self.max_events = max_audio, max_events
        # Events are bounded in size too: a few thousand large events (each up to
        # protocol.MAX_EVENT_BYTES) would otherwise be a gigabyte for one session.
        self.max_event_chars = max_event_chars
        self._items: deque[Item] = deque()
        self._audio = 0
        self._event_chars = 0
        # One event, cleared before each wait: not a new one per wait (the
        # sender of every session waits once per batch).
        self._ready = asyncio.Event()
        self.overflowed = False
        self.closed = False  # a Close was queued: nothing more is taken

    def put(self, item: Item) -> bool:
        """Queue ``item``; False (and ``overflowed``) when the bound is passed."""
        if self.closed:
            return True  # the socket is closing: what comes now is not sent
        if isinstance(item, Audio):
            self._audio += 1
        elif isinstance(item, str):
            self._event_chars += len(item)
        self._items.append(item)
        if isinstance(item, Close):
            self.closed = True
        elif (
            self._audio > self.max_audio
            or len(self._items) - self._audio > self.max_events
            or (self.max_event_chars is not None and self._event_chars > self.max_event_chars)
        ):
            self.overflowed = True
        self._ready.set()
        return not self.overflowed

    def close(self, code: int, reason: str, *events: str, discard: bool = False) -> None:
        """Send what is queued (unless ``discard``), then ``events``, then close."""
        if self.closed:
            return
        if discard:
            self.clear()
        self._items.extend(events)
        self.put(Close(code, reason))

    def drop_audio(self, turn: int) -> int:
        """Drop the queued frames of ``turn`` (an interruption); return how many."""
        kept = deque(i for i in self._items if not (isinstance(i, Audio) and i.turn == turn))
        dropped = len(self._items) - len(kept)
        self._items = kept
        self._audio -= dropped
        return dropped

    def clear(self) -> None:
        self._items.clear()
        self._audio = 0
        self._event_chars = 0

    async def get(self) -> Item:
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        item = self._items.popleft()
        if isinstance(item, Audio):
            self._audio -= 1
        elif isinstance(item, str):
            self._event_chars -= len(item)
        return item

    def take_audio(self, limit: int) -> list[bytes | str]:
        """The data of the Audio items at the head of the queue, up to ``limit``,
        taken without waiting (the sender writes them together)."""
        taken: list[bytes | str] = []
        items = self._items
        while items and len(taken) < limit:
            head = items[0]
            if not isinstance(head, Audio):
                break
            items.popleft()
            taken.append(head.data)
        self._audio -= len(taken)
        return taken

    def __len__(self) -> int:
        return len(self._items)

"""The Redis session store kept through an outage.

A call Redis does not answer (each waits at most 1 s, retried once) logs one
warning, ``session_store_lost``, and until Redis answers again:

- the sessions go on and no turn waits: each write is held in this process's
  memory (the newest per session; a session ended, as its deletion), dropped
  once its grace period is over;
- a resume is refused at once with ``StoreUnavailable`` (the client is told to
  try again, not that the session is gone: its record may be in Redis, or held
  by any process);
- ``keep_up`` (a task of the server) asks Redis again with backoff; once it
  answers, the held writes are written (each kept what is left of its grace
  period), ``session_store_back`` is logged, and ``on_back`` has the live
  sessions write their records again (a Redis restarted empty lost them).
"""

from __future__ import annotations

from dataclasses import dataclass
from time import monotonic

import anyio

from .log import Log
from .redis_store import RedisStore
from .session_store import MemoryStore, SessionRecord, SessionStore, StoreUnavailable

# Between tries to reach a lost Redis: soon after a blip, then every 5 s (a
# ping that is not answered waits 1 s, retried once).
BACKOFF_S = (0.25, 0.5, 1.0, 2.0, 4.0, 5.0)


@dataclass
class _Held:
    """A write Redis did not take: the record (None: the session was ended)."""

    record: SessionRecord | None
    token_hash: str
    owner: str
    at: float  # monotonic(), when it was written


class ReconnectingStore(SessionStore):
    def __init__(self, primary: RedisStore, log: Log) -> None:
        super().__init__(primary.grace_s, primary.max_bytes)
        self.primary, self.log = primary, log
        self.name = primary.name
        self.held: dict[str, _Held] = {}
        self.lost_at: float | None = None  # monotonic(), while Redis is lost
        self._lost = anyio.Event()

    @property
    def lost(self) -> bool:
        return self.lost_at is not None

    def _lose(self, exc: StoreUnavailable) -> None:
        if self.lost_at is None:
            self.lost_at = monotonic()
            self._lost.set()
            self.log(
                "session_store_lost",
                level="warning",
                store=self.name,
                error=str(exc),
                now="sessions go on, their records held here until it is back; "
                "a resume is told to try again",
            )

    def _hold(
        self, session: str, record: SessionRecord | None, token_hash: str, owner: str
    ) -> None:
        self.held[session] = _Held(record, token_hash, owner, monotonic())

    async def open(self) -> None:
        await self.primary.open()

    async def aclose(self) -> None:
        await self.primary.aclose()

    async def save(self, record: SessionRecord, token_hash: str, owner: str) -> bool:
        if not self.lost:
            try:
                return await self.primary.save(record, token_hash, owner)
            except StoreUnavailable as exc:
                self._lose(exc)
        self._hold(record.session, record, token_hash, owner)
        return True

    async def claim(
        self, session: str, token_hash: str, new_token_hash: str, new_owner: str
    ) -> SessionRecord | None:
        if self.lost:
            raise StoreUnavailable(f"{self.name}: lost, trying to reach it again")
        try:
            return await self.primary.claim(session, token_hash, new_token_hash, new_owner)
        except StoreUnavailable as exc:
            self._lose(exc)
            raise

    async def forget(self, session: str, owner: str) -> None:
        if not self.lost:
            try:
                await self.primary.forget(session, owner)
                return
            except StoreUnavailable as exc:
                self._lose(exc)
        self._hold(session, None, "", owner)

    async def keep_up(self) -> None:
        while True:
            await self._lost.wait()
            await self._reconnect()

    async def _reconnect(self) -> None:
        """Ask Redis with backoff until it answers and takes every held write."""
        attempt = 0
        while True:
            await anyio.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
            attempt += 1
            self._drop_expired()
            try:
                await self.primary.ping()
                written = await self._write_held()
            except StoreUnavailable:
                continue
            break
        assert self.lost_at is not None
        lost_s = monotonic() - self.lost_at
        self.lost_at, self._lost = None, anyio.Event()  # (nothing awaited since the last held)
        self.log("session_store_back", store=self.name, written=written, lost_s=round(lost_s, 1))
        if self.on_back is not None:
            self.on_back()

    async def _write_held(self) -> int:
        """Write what was held; a write held meanwhile is written too."""
        written = 0
        while self.held:
            session, held = next(iter(self.held.items()))
            left_s = self.grace_s - (monotonic() - held.at)
            if left_s >= 1:  # (else it expired while Redis was away)
                if held.record is None:
                    await self.primary.forget(session, held.owner)
                else:
                    await self.primary.save(held.record, held.token_hash, held.owner, left_s)
                written += 1
            if self.held.get(session) is held:  # (else replaced meanwhile: written next)
                del self.held[session]
        return written

    def _drop_expired(self) -> None:
        """Held writes whose grace period is over: their sessions are gone."""
        now = monotonic()
        for session in [s for s, h in self.held.items() if now - h.at >= self.grace_s]:
            del self.held[session]


def store_for(url: str, grace_s: float, max_bytes: int, log: Log) -> SessionStore:
    """``memory`` or ``redis://…`` (``rediss://`` for TLS, ``unix://`` for a socket)."""
    if url == "memory":
        return MemoryStore(grace_s, max_bytes)
    return ReconnectingStore(RedisStore(url, grace_s, max_bytes), log)

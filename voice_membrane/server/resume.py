"""A protocol session's place in the session store: its resume token, its record
written in the background at each turn's start and end (and refreshed while
the connection lives), the claim a ``session.resume`` makes, and the hand-over
when a newer connection resumes a session this process still serves.

The record is written by one task per session, newest snapshot first, so a
slow or lost store never holds up a turn; a write refused because another
connection owns the session now (a resume elsewhere) ends this one with 4409.
``put`` gives an event set once that snapshot (or a newer one) is written: a
turn's ``turn.end`` waits for it, so a client that resumes on another process
the moment it is told finds the turn stored.
"""

from __future__ import annotations

import contextlib

import anyio

from ..pipeline.session import Session, TurnRecord
from .log import Log
from .session_store import (
    LastTurn,
    SessionRecord,
    SessionStore,
    StoredTurn,
    StoreUnavailable,
    new_owner,
    new_resume_token,
    token_hash,
)

# How long a newer connection waits for an older one on this process to hand
# over its last record (its running turn cut, what was heard kept).
HAND_OVER_S = 3.0
STORE_DEADLINE_S = 3.0  # the last write when a session ends: never longer
TURN_END_WAIT_S = 1.0  # what a turn.end waits for its record at most (a stuck store)


class Keeper:
    """``live``: the sessions this process serves, by id (the server's
    ``ServerState.live``, shared by every connection's keeper)."""

    def __init__(self, store: SessionStore, live: dict[str, Keeper], log: Log) -> None:
        self.store, self.live, self.log = store, live, log
        self.session = ""
        self.owner = new_owner()
        self.token_hash = ""
        self._latest: SessionRecord | None = None
        self._dirty = anyio.Event()
        self._written: anyio.Event | None = None  # set once ``_latest`` is written
        self._stopped = False
        self.superseded = anyio.Event()  # a newer connection owns the session now
        self.handed_over: SessionRecord | None = None
        self.finished = anyio.Event()  # ``handed_over`` is final

    def issue(self, session: str) -> str:
        """A fresh resume token for ``session`` (its hash only is kept), and this
        connection is the one serving it on this process."""
        self.session = session
        token = new_resume_token()
        self.token_hash = token_hash(session, token)
        older = self.live.get(session)
        self.live[session] = self
        if older is not None and older is not self:
            older.superseded.set()
        return token

    async def claim(self, session: str, offered: str) -> tuple[SessionRecord, str] | None:
        """The session's record and a new token for it, or None (unknown, expired,
        or the wrong token); ``StoreUnavailable`` while the store cannot be reached
        (the client may try again). An older connection serving it on this process
        is superseded, and its own last record (its running turn cut, what was
        heard kept) preferred to the stored one."""
        fresh = new_resume_token()
        record = await self.store.claim(
            session, token_hash(session, offered), token_hash(session, fresh), self.owner
        )
        if record is None or record.session != session:
            return None
        self.session, self.token_hash = session, token_hash(session, fresh)
        older = self.live.get(session)
        self.live[session] = self
        if older is not None and older is not self:
            older.superseded.set()
            with anyio.move_on_after(HAND_OVER_S):
                await older.finished.wait()
            if older.handed_over is not None:
                record = older.handed_over
        return record, fresh

    async def give_back(self, record: SessionRecord, offered: str) -> None:
        """A claimed session this process cannot serve (its pipeline is not here):
        the offered token is made good again, so the client may try a replica
        that serves it."""
        with anyio.move_on_after(STORE_DEADLINE_S):
            with contextlib.suppress(StoreUnavailable):
                await self.store.save(record, token_hash(record.session, offered), self.owner)
        if self.live.get(self.session) is self:
            del self.live[self.session]

    def write_again(self) -> None:
        """The latest snapshot is written again (the store came back, maybe empty)."""
        if self._latest is not None:
            self._dirty.set()

    def put(self, record: SessionRecord) -> anyio.Event:
        """The session as it is now: written by ``run`` as soon as it can; the
        event is set once it is (or once nothing more will be written)."""
        self._latest = record
        self._dirty.set()
        if self._written is None:
            self._written = anyio.Event()
        written = self._written
        if self._stopped:
            written.set()
        return written

    async def run(self) -> None:
        """Write each new snapshot; refresh the record a few times per grace period
        so a session that lives longer than it is kept all along."""
        refresh_s = max(0.5, self.store.grace_s / 3)
        try:
            while not self.superseded.is_set():
                with anyio.move_on_after(refresh_s):
                    await self._dirty.wait()
                self._dirty = anyio.Event()
                written, self._written = self._written, None  # (a put while writing: next)
                saved = self._latest is None or await self._write(self._latest)
                if written is not None:
                    written.set()
                if not saved:
                    self.superseded.set()
                    return
        finally:  # nothing more is written: no turn.end waits for it
            self._stopped = True
            if self._written is not None:
                self._written.set()

    async def _write(self, record: SessionRecord) -> bool:
        try:
            return await self.store.save(record, self.token_hash, self.owner)
        except StoreUnavailable as exc:  # (only a bare RedisStore raises it)
            self.log("session_store_error", session=self.session, error=str(exc))
            return True

    def hand_over(self, record: SessionRecord) -> None:
        """Superseded on this process: the newer connection takes this record."""
        self.handed_over = record
        self.finished.set()

    async def finish(self, record: SessionRecord | None, keep: bool) -> None:
        """The connection is over: its last record written (a dropped client may
        resume within the grace period), or forgotten (``session.end``)."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(STORE_DEADLINE_S):
            try:
                if not self.superseded.is_set() and record is not None:
                    if keep:
                        await self.store.save(record, self.token_hash, self.owner)
                    else:
                        await self.store.forget(record.session, self.owner)
            except StoreUnavailable as exc:
                self.log("session_store_error", session=self.session, error=str(exc))
        if self.live.get(self.session) is self:
            del self.live[self.session]
        if not self.finished.is_set():
            self.handed_over = record
            self.finished.set()


def stored_history(session: Session) -> tuple[StoredTurn, ...]:
    return tuple(
        StoredTurn(
            user=r.user_text,
            heard=r.heard,
            participant=r.participant,
            outcome=r.outcome,
            error=r.error,
        )
        for r in session.history
    )


def restore_history(session: Session, record: SessionRecord) -> None:
    """The stored conversation, as the session's own history (what every later
    request carries)."""
    session.history = [
        TurnRecord(t.user, t.heard, t.participant, (), t.outcome, t.error) for t in record.history
    ]
    session.first_kept = record.first_kept


def last_turn_event(last: LastTurn | None) -> dict[str, object] | None:
    return None if last is None else last.model_dump()

"""Where a session's conversation waits for its client to come back: one small
interface, ``SessionStore``, with ``MemoryStore`` (one process, the default) and
``redis_store.RedisStore`` (every process and replica sharing one Redis).

A record is JSON (pydantic), never pickle: what a resumed session needs to go
on — its pipeline and audio settings, the kept history, the turn that was
running at the last write and how the last turn ended. Beside it the store
keeps a *claim*: the SHA-256 of the session's resume token (never the token)
and the connection that owns the session. A write by a connection that no
longer owns it is refused (``save`` returns False), so a connection superseded
by a resume elsewhere cannot overwrite the newer one's history. Both expire
``grace_s`` after the last write.

What the user and the model said is stored masked (``stored_json``): a key,
token or password in it, by value or by shape, is ``***``, as in every event
and log line, since whoever can read the store reads every conversation.
"""

from __future__ import annotations

import hashlib
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from time import monotonic
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..infra.redact import redact
from . import protocol as p

# Two minutes: a phone that changes networks, a laptop that wakes, a proxy's
# restart all reconnect well within it, and a conversation abandoned longer is
# not kept (nor its text) for long.
DEFAULT_GRACE_S = 120.0
# A record's JSON at most (256 KiB, about 150 turns of a few sentences each):
# past it the oldest turns are dropped, as a long session's own history is.
DEFAULT_MAX_BYTES = 256 * 1024
MIN_MAX_BYTES = 16 * 1024
MAX_LAST_HEARD_CHARS = 8000  # the last turn's heard text in ``session.resumed``

Fate = Literal["complete", "interrupted", "error", "cancelled"]


class StoreUnavailable(Exception):
    """The store cannot be reached (Redis down); the message is one line."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StoredTurn(_Model):
    """A turn as the history keeps it (``session.TurnRecord`` without images)."""

    user: str
    heard: str = ""
    participant: str
    outcome: Literal["complete", "interrupted", "error"] = "complete"
    error: str | None = None


class LastTurn(_Model):
    """How the session's last turn ended: ``cancelled`` when it was running as its
    server went away (it is not in the history)."""

    turn: int
    fate: Fate
    text: str = ""  # what the user said (typed, or as heard)
    heard: str = ""  # what the user heard of the reply
    error: str | None = None


class SessionRecord(_Model):
    v: Literal[1] = 1
    session: str = Field(pattern=r"^s[a-z2-7]{16}$")
    pipeline: str
    audio: p.AudioFormat = Field(default_factory=p.Pcm16Format)
    input_audio: p.InputAudio | None = None
    turn_taking: p.TurnTaking = "vad"
    turn: int = 0  # the last turn's number: a resumed session goes on from it
    first_kept: int = 0  # turns dropped from the history (by the session or the bound)
    history: tuple[StoredTurn, ...] = ()
    running: int | None = None  # the turn running at the last write
    running_text: str = ""
    last_turn: LastTurn | None = None

    def resumed_last_turn(self) -> LastTurn | None:
        """The last turn as a resumed client is told: one still running at the last
        write was lost with its server."""
        if self.running is not None:
            return LastTurn(turn=self.running, fate="cancelled", text=self.running_text)
        return self.last_turn


def bounded_json(record: SessionRecord, max_bytes: int) -> str:
    """The record's JSON within ``max_bytes``: the oldest turns dropped first (they
    count in ``first_kept``), then the last turn's heard text cut."""
    text = record.model_dump_json()
    if len(text.encode()) <= max_bytes:
        return text
    history = list(record.history)
    sizes = [len(turn.model_dump_json().encode()) + 1 for turn in history]
    excess = len(text.encode()) - max_bytes
    drop = 0
    while drop < len(history) and excess > 0:
        excess -= sizes[drop]
        drop += 1
    record = record.model_copy(
        update={"history": tuple(history[drop:]), "first_kept": record.first_kept + drop}
    )
    if excess > 0 and record.last_turn is not None:
        heard = record.last_turn.heard
        cut = heard[: max(0, len(heard) - excess)]
        last = record.last_turn.model_copy(update={"heard": cut})
        record = record.model_copy(update={"last_turn": last})
    return record.model_dump_json()


def masked(record: SessionRecord) -> SessionRecord:
    """The record with every secret masked (``redact``: keys by value and by shape,
    credentials in URLs) in each text the user or the model gave: the turns' text,
    what was heard, speakers, errors, the running turn's text.

    Its JSON is masked whole, as an event is (one pass: about 3 ms for a record
    of 150 turns, 87 KB, on this 2-core machine under load, where masking each
    text apart took 29); should that break the JSON (a known value ending in an
    escape) or touch what is not text (the pipeline's name), each text apart."""
    text = record.model_dump_json()
    shown = redact(text)
    if shown == text:
        return record
    kept = parse_record(shown)
    if kept is not None and kept.pipeline == record.pipeline:
        return kept
    return _masked_texts(record)


def _masked_texts(record: SessionRecord) -> SessionRecord:

    def turn(t: StoredTurn) -> StoredTurn:
        error = None if t.error is None else redact(t.error)
        return StoredTurn(
            user=redact(t.user),
            heard=redact(t.heard),
            participant=redact(t.participant),
            outcome=t.outcome,
            error=error,
        )

    last = record.last_turn
    if last is not None:
        error = None if last.error is None else redact(last.error)
        last = last.model_copy(
            update={"text": redact(last.text), "heard": redact(last.heard), "error": error}
        )
    return record.model_copy(
        update={
            "history": tuple(turn(t) for t in record.history),
            "running_text": redact(record.running_text),
            "last_turn": last,
        }
    )


def stored_json(record: SessionRecord, max_bytes: int) -> str:
    """What a store writes: the record masked, within ``max_bytes``."""
    return bounded_json(masked(record), max_bytes)


def parse_record(text: str) -> SessionRecord | None:
    """A stored record, or None when it cannot be read (another version's, or damaged)."""
    try:
        return SessionRecord.model_validate_json(text)
    except ValidationError:
        return None


def new_resume_token() -> str:
    return secrets.token_urlsafe(32)  # 256 bits


def token_hash(session: str, token: str) -> str:
    """What the store keeps of a token: bound to its session (the same token for
    another session is another hash)."""
    return hashlib.sha256(f"{session}\0{token}".encode()).hexdigest()


def new_owner() -> str:
    return secrets.token_hex(8)


class SessionStore(ABC):
    """Records by session id with their claim, expiring ``grace_s`` after the last write."""

    def __init__(self, grace_s: float = DEFAULT_GRACE_S, max_bytes: int = DEFAULT_MAX_BYTES):
        self.grace_s, self.max_bytes = grace_s, max_bytes
        # Called when the store is reachable again after an outage (the server's
        # live sessions write their records again).
        self.on_back: Callable[[], None] | None = None

    name: str = "memory"  # what the log says it is (never a password)

    async def open(self) -> None:  # noqa: B027 (a store in memory has nothing to open)
        """Check it can be reached (``StoreUnavailable`` in one line)."""

    async def keep_up(self) -> None:  # noqa: B027 (one in memory is never lost)
        """While the server runs: bring the store back after an outage."""

    async def aclose(self) -> None:  # noqa: B027
        """Let go of its connections."""

    @abstractmethod
    async def save(self, record: SessionRecord, token_hash: str, owner: str) -> bool:
        """Write the record and its claim (a new session's too). False, and nothing
        written, when another connection owns the session now."""

    @abstractmethod
    async def claim(
        self, session: str, token_hash: str, new_token_hash: str, new_owner: str
    ) -> SessionRecord | None:
        """If the session is kept and ``token_hash`` is its token's: the session is
        ``new_owner``'s with a new token (the old one is spent), and its record.
        Otherwise None (unknown, expired, or the wrong token: not told apart)."""

    @abstractmethod
    async def forget(self, session: str, owner: str) -> None:
        """The session ended for good (``session.end``): nothing is kept of it."""


@dataclass
class _Kept:
    text: str
    token_hash: str
    owner: str
    expires: float


class MemoryStore(SessionStore):
    """One process's sessions: a resume works on the process that served them."""

    name = "memory"

    def __init__(self, grace_s: float = DEFAULT_GRACE_S, max_bytes: int = DEFAULT_MAX_BYTES):
        super().__init__(grace_s, max_bytes)
        self._kept: dict[str, _Kept] = {}
        self._next_purge = 0.0

    def _live(self, session: str) -> _Kept | None:
        now = monotonic()
        if now >= self._next_purge:  # expired records go, a few times per grace period
            self._next_purge = now + self.grace_s / 4
            for key in [k for k, v in self._kept.items() if v.expires <= now]:
                del self._kept[key]
        kept = self._kept.get(session)
        if kept is not None and kept.expires <= now:
            del self._kept[session]
            return None
        return kept

    async def save(self, record: SessionRecord, token_hash: str, owner: str) -> bool:
        kept = self._live(record.session)
        if kept is not None and kept.owner != owner:
            return False
        text = stored_json(record, self.max_bytes)
        expires = monotonic() + self.grace_s
        self._kept[record.session] = _Kept(text, token_hash, owner, expires)
        return True

    async def claim(
        self, session: str, token_hash: str, new_token_hash: str, new_owner: str
    ) -> SessionRecord | None:
        kept = self._live(session)
        if kept is None or not secrets.compare_digest(kept.token_hash, token_hash):
            return None
        kept.token_hash, kept.owner = new_token_hash, new_owner
        kept.expires = monotonic() + self.grace_s
        return parse_record(kept.text)

    async def forget(self, session: str, owner: str) -> None:
        kept = self._live(session)
        if kept is not None and kept.owner == owner:
            del self._kept[session]

    def __len__(self) -> int:
        return len(self._kept)

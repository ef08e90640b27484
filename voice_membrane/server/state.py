"""What every connection of a server shares: its settings, metrics, log and drain state."""

from __future__ import annotations

import base64
import hmac
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ..pipeline.config import PipelineConfig
from .log import JsonLog, Log
from .loop_lag import Heartbeat, LoopLag
from .pacing import LEAD_S
from .prometheus import ServerMetrics
from .session_store import MemoryStore, SessionStore
from .twilio_call_token import CallTokens

if TYPE_CHECKING:
    from .resume import Keeper

# A client that stops reading is dropped once this much audio waits for it.
MAX_QUEUED_AUDIO_S = 2.0
MAX_QUEUED_EVENTS = 4096
MAX_QUEUED_EVENT_CHARS = 8 * 1024 * 1024  # ~8 MB of events waiting for one client
# The most sessions at once by default: at 50 concurrent sessions one serve process on
# this project's 2-core machine kept first audio within 31 ms of the ideal at p99
# (docs/benchmarks.md, serve under load); at 100 it was 102 ms, at 200 over a second.
DEFAULT_MAX_SESSIONS = 50


@dataclass
class ServerState:
    pipelines: dict[str, PipelineConfig]  # by name (the file's stem); the first is the default
    token: str | None = None
    idle_timeout_s: float = 300.0
    drain_timeout_s: float = 30.0
    start_timeout_s: float = 10.0
    close_timeout_s: float = 10.0
    max_queued_audio_s: float = MAX_QUEUED_AUDIO_S
    max_queued_events: int = MAX_QUEUED_EVENTS
    max_queued_event_chars: int = MAX_QUEUED_EVENT_CHARS
    messages_per_second: int = 20
    # The most sessions at once (None: no limit); one more is refused with 1013, so a
    # load balancer tries another replica instead of every session being served late.
    max_sessions: int | None = DEFAULT_MAX_SESSIONS
    # The kernel's send buffer of a session's socket, in seconds of its audio (the
    # lead's worth), not the MBs it autotunes to: it bounds what a stalled client pins.
    send_buffer_s: float = LEAD_S
    # Where each listening session's input audio is written (None: never stored).
    debug_audio_dir: Path | None = None
    log: Log = field(default_factory=JsonLog)
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    draining: anyio.Event = field(default_factory=anyio.Event)
    drain_deadline: float = float("inf")  # anyio.current_time() when running turns are cut
    sessions: int = 0
    turns_running: int = 0
    # Where sessions wait for their client to come back (``session.resume``), and
    # the protocol sessions this process serves, by id (a newer resume supersedes).
    store: SessionStore = field(default_factory=MemoryStore)
    live: dict[str, Keeper] = field(default_factory=dict)
    # With a Twilio auth token: each call's start must bring its TwiML's token.
    call_tokens: CallTokens | None = None
    # How long this process's loop was too busy to read its sockets (the heartbeat,
    # while a session takes audio in; without it, never): credited to the
    # clients' audio budgets.
    loop_lag: LoopLag = field(default_factory=LoopLag)
    heartbeat: Heartbeat = field(init=False)

    def __post_init__(self) -> None:
        self.heartbeat = Heartbeat(self.loop_lag)

    @property
    def default_pipeline(self) -> str:
        return next(iter(self.pipelines))

    def check_token(self, offered: str | None) -> bool:
        """Constant-time comparison; True when the server has no token."""
        if self.token is None:
            return True
        if offered is None:
            return False
        return hmac.compare_digest(offered.encode(), self.token.encode())

    def take_slot(self) -> bool:
        """Count one more session, unless the server has ``max_sessions``: checked and
        taken in one step, before anything of the session is built, so sessions
        starting at once cannot all pass the check (``release_slot`` gives it back)."""
        if self.max_sessions is not None and self.sessions >= self.max_sessions:
            return False
        self.sessions += 1
        self.metrics.sessions.inc()
        return True

    def release_slot(self) -> None:
        self.sessions -= 1
        self.metrics.sessions.dec()

    def write_again(self) -> None:
        """Each live session writes its record again (the store is back from an
        outage: it may have come back empty)."""
        for keeper in list(self.live.values()):
            keeper.write_again()

    def session_id(self) -> str:
        return new_session_id()


# 80 random bits: unique across processes, replicas and restarts without any
# coordination (a collision among a billion ids is about 1 in 2.4 million), and
# short enough to read in a log line.
SESSION_ID_BYTES = 10
SESSION_ID_PATTERN = r"^s[a-z2-7]{16}$"


def new_session_id() -> str:
    """``s`` and 16 lowercase base32 characters (80 random bits)."""
    raw = secrets.token_bytes(SESSION_ID_BYTES)
    return "s" + base64.b32encode(raw).decode().lower()

"""A served session's watchdogs: it is closed when idle too long, and when the
server drains (after its running turn, or the whole session for a call)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import anyio

from . import protocol as p

if TYPE_CHECKING:
    from ..pipeline.session import Session
    from .state import ServerState


class Watched(Protocol):
    """What the watchdogs read of a session (``served_session.ServedSession``)."""

    id: str
    state: ServerState
    session: Session | None
    turn_done: anyio.Event  # (a new one each turn: read it each time)
    last_activity: float

    @property
    def lives_through_drain(self) -> bool: ...

    def close(self, code: int, reason: str, *events: str, discard: bool = False) -> None: ...


async def idle_watchdog(watched: Watched) -> None:
    """Only a message, speech or a turn is activity: audio of silence is not."""
    state = watched.state
    timeout = state.idle_timeout_s
    while True:
        await watched.turn_done.wait()
        remaining = watched.last_activity + timeout - anyio.current_time()
        if remaining <= 0 and watched.turn_done.is_set():
            state.metrics.errors.labels("idle_timeout").inc()
            state.log("idle_timeout", session=watched.id)
            message = f"no message or speech for {timeout:g} s"
            watched.close(p.CLOSE_IDLE, "idle_timeout", p.error_event("idle_timeout", message))
            return
        await anyio.sleep(max(remaining, 0.01))


async def drain_watch(watched: Watched) -> None:
    """On drain: let the running turn finish (a session that lives through a
    drain: the whole session), up to the deadline; then close 1001."""
    state = watched.state
    await state.draining.wait()
    if watched.lives_through_drain:  # its end cancels this watch with the session
        await anyio.sleep_until(state.drain_deadline)
    with anyio.move_on_after(state.drain_deadline - anyio.current_time()):
        await watched.turn_done.wait()
    if not watched.turn_done.is_set() and watched.session is not None:
        # Cut as an interruption, so the client still gets the turn's end and
        # what was heard of it.
        watched.session.interrupt()
        with anyio.move_on_after(state.close_timeout_s):
            await watched.turn_done.wait()
    watched.close(p.CLOSE_GOING_AWAY, "server shutting down")

"""Who gets a session: the token (header or ``session.start``), the rate limit
before the start, the pipeline's name, drain and the session limit — every
check before anything is built, so a refused client costs no model, no MCP
server, no socket to a cloud engine. Nothing is said to a socket that has not
authenticated: the close alone."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import anyio
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from . import protocol as p
from .prometheus import RefusedLogin
from .rate_limit import RateLimit, Verdict
from .state import ServerState


async def refuse(
    ws: ServerConnection, state: ServerState, session_id: str, code: int, reason: str, *events: str
) -> None:
    # Logged first: the line says why whatever the close then takes.
    state.log("refused", session=session_id, code=code, reason=reason)
    try:
        for text in events:
            await ws.send(text)
        await close_discarding(ws, code, reason)
    except ConnectionClosed:
        pass


async def close_discarding(ws: ServerConnection, code: int, reason: str) -> None:
    """Close, reading and dropping what the client sends meanwhile: websockets
    stops reading a socket on which 16 messages wait unread, and the client's
    answering close would wait behind them for the whole close timeout. (Only
    where nothing else reads the socket.)"""
    async with anyio.create_task_group() as tg:
        tg.start_soon(_discard, ws)
        with contextlib.suppress(ConnectionClosed):
            await ws.close(code, reason)
        tg.cancel_scope.cancel()


async def _discard(ws: ServerConnection) -> None:
    with contextlib.suppress(ConnectionClosed):
        while True:
            await ws.recv()


async def send_error_now(
    ws: ServerConnection, state: ServerState, code: p.ErrorCode, message: str
) -> None:
    """Before the session's sender runs: send an error directly."""
    state.metrics.errors.labels(code).inc()
    with contextlib.suppress(ConnectionClosed):
        await ws.send(p.error_event(code, message))


class Admission:
    def __init__(
        self, ws: ServerConnection, state: ServerState, session_id: str, limit: RateLimit
    ) -> None:
        self.ws, self.state, self.id, self.limit = ws, state, session_id, limit

    async def admit(self) -> p.SessionStart | p.SessionResume | None:
        """The client's accepted ``session.start`` (or ``session.resume``) with a
        session slot taken (the caller releases it), or None: refused and closed."""
        state = self.state
        header_token = _bearer(self.ws)
        if header_token is not None and not state.check_token(header_token):
            await self._refuse_login("wrong_token")
            return None
        if state.draining.is_set():
            state.metrics.errors.labels("draining").inc()
            # An event only to a client that has authenticated: the others get the close.
            told = header_token is not None or state.token is None
            events = (p.error_event("draining", DRAINING),) if told else ()
            await self._refuse(p.CLOSE_TRY_AGAIN, "draining", *events)
            return None
        start = await self._await_start(authenticated=header_token is not None)
        if start is None:
            return None
        # Every limit before anything is built: a refused session starts no MCP
        # server, loads no model, opens no voice.
        if state.draining.is_set():  # (it may have begun while we waited for the start)
            state.metrics.errors.labels("draining").inc()
            await self._refuse(p.CLOSE_TRY_AGAIN, "draining", p.error_event("draining", DRAINING))
            return None
        if not state.take_slot():
            state.metrics.errors.labels("full").inc()
            await self._refuse(p.CLOSE_TRY_AGAIN, "full", p.error_event("full", FULL))
            return None
        return start

    async def _refuse(self, code: int, reason: str, *events: str) -> None:
        await refuse(self.ws, self.state, self.id, code, reason, *events)

    async def _send_error_now(self, code: p.ErrorCode, message: str) -> None:
        await send_error_now(self.ws, self.state, code, message)

    async def _refuse_login(self, why: RefusedLogin) -> None:
        self.state.metrics.refused_logins.labels(why).inc()
        await self._refuse(p.CLOSE_UNAUTHORIZED, "unauthorized")

    async def _await_start(self, authenticated: bool) -> p.SessionStart | p.SessionResume | None:
        """The client's ``session.start`` or ``session.resume`` (authenticated
        alike), or None once the socket is closed or refused."""
        needs_token = self.state.token is not None and not authenticated
        outcome: _Start | _Refused | None = _LATE
        with anyio.move_on_after(self.state.start_timeout_s):
            outcome = await self._read_start(needs_token)
        if not isinstance(outcome, _Refused):
            return outcome
        # Refused outside the deadline: a close that waits for its client stays the
        # refusal it is, never an idle timeout.
        if outcome.login is not None:
            await self._refuse_login(outcome.login)
            return None
        # Nothing is said to a socket that has not authenticated: the close alone.
        late = "no session.start within the time allowed"
        told = outcome is _LATE and not needs_token
        events = (p.error_event("idle_timeout", late),) if told else ()
        await self._refuse(outcome.code, outcome.reason, *events)
        return None

    async def _read_start(
        self, needs_token: bool
    ) -> p.SessionStart | p.SessionResume | _Refused | None:
        state = self.state
        while True:
            try:
                data = await self.ws.recv()
            except ConnectionClosed:
                return None
            verdict = self.limit.check(anyio.current_time())
            if verdict is Verdict.DISCONNECT:
                return _FLOOD
            if verdict is not Verdict.ACCEPT:
                continue  # dropped unanswered: no session yet
            try:
                message = p.parse_client_message(data)
            except p.BadMessage as exc:
                message, problem = None, str(exc)
            if needs_token:
                offered = message.token if isinstance(message, _Start) else None
                if offered is None:
                    return _NO_TOKEN
                if not state.check_token(offered):
                    return _WRONG_TOKEN
            if message is None:
                await self._send_error_now("bad_message", problem)
            elif isinstance(message, p.SessionResume):
                return message  # (its pipeline is the stored one's)
            elif not isinstance(message, p.SessionStart):
                await self._send_error_now(
                    "bad_message", "the first message must be session.start or session.resume"
                )
            elif (message.pipeline or state.default_pipeline) not in state.pipelines:
                names = ", ".join(state.pipelines)
                await self._send_error_now("pipeline_not_allowed", f"pipelines here: {names}")
            else:
                return message


@dataclass(frozen=True)
class _Refused:
    """How the wait for the start ends when it ends no session."""

    code: int
    reason: str
    login: RefusedLogin | None = None  # a refused login, counted by its reason


_Start = p.SessionStart | p.SessionResume
_LATE = _Refused(p.CLOSE_IDLE, "idle_timeout")
_FLOOD = _Refused(p.CLOSE_POLICY, "rate_limited")
_NO_TOKEN = _Refused(p.CLOSE_UNAUTHORIZED, "unauthorized", "no_token")
_WRONG_TOKEN = _Refused(p.CLOSE_UNAUTHORIZED, "unauthorized", "wrong_token")

DRAINING = "this server is shutting down: connect again (another replica)"
FULL = "this server has as many sessions as it takes: connect again (another replica)"


def _bearer(ws: ServerConnection) -> str | None:
    request = ws.request
    if request is None:
        return None
    value = request.headers.get("Authorization")
    if value is None:
        return None
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""

"""Who gets a session: the token (header or ``session.start``), the rate limit
before the start, the pipeline's name, drain and the session limit — every
check before anything is built, so a refused client costs no model, no MCP
server, no socket to a cloud engine. Nothing is said to a socket that has not
authenticated: the close alone."""

from __future__ import annotations

import contextlib

import anyio
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from . import protocol as p
from .rate_limit import RateLimit, Verdict
from .state import ServerState


async def refuse(
    ws: ServerConnection, state: ServerState, session_id: str, code: int, reason: str, *events: str
) -> None:
    try:
        for text in events:
            await ws.send(text)
        await ws.close(code, reason)
    except ConnectionClosed:
        pass
    state.log("refused", session=session_id, code=code, reason=reason)


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
            await self._refuse(p.CLOSE_UNAUTHORIZED, "unauthorized")
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

    async def _await_start(self, authenticated: bool) -> p.SessionStart | p.SessionResume | None:
        """The client's ``session.start`` or ``session.resume`` (authenticated
        alike), or None once the socket is closed."""
        state = self.state
        needs_token = state.token is not None and not authenticated
        with anyio.move_on_after(state.start_timeout_s):
            while True:
                try:
                    data = await self.ws.recv()
                except ConnectionClosed:
                    return None
                verdict = self.limit.check(anyio.current_time())
                if verdict is Verdict.DISCONNECT:
                    await self._refuse(p.CLOSE_POLICY, "rate_limited")
                    return None
                if verdict is not Verdict.ACCEPT:
                    continue  # dropped unanswered: no session yet
                try:
                    message = p.parse_client_message(data)
                except p.BadMessage as exc:
                    message, problem = None, str(exc)
                if needs_token and not (
                    isinstance(message, p.SessionStart | p.SessionResume)
                    and state.check_token(message.token)
                ):
                    await self._refuse(p.CLOSE_UNAUTHORIZED, "unauthorized")
                    return None
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
        # Nothing is said to a socket that has not authenticated: the close alone.
        late = "no session.start within the time allowed"
        events = () if needs_token else (p.error_event("idle_timeout", late),)
        await self._refuse(p.CLOSE_IDLE, "idle_timeout", *events)
        return None


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

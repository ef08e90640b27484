"""The server's WebRTC sessions: each offer's peer answered, then run in the
host's task group until its channel or peer closes, and closed with the server.

An answered peer whose data channel does not open within the start timeout
(ICE or DTLS never completing, a client gone) is logged in one line
(``webrtc_failed``) and closed. Whatever ends a session, its peer connection
is closed in the same task: its UDP sockets, DTLS and SCTP go with it. Peers
answered but not yet open count against ``max_sessions`` with the sessions, so
offers cannot hold more sockets than the server takes sessions.
"""

from __future__ import annotations

import anyio
from anyio.abc import TaskGroup
from websockets.http11 import Request

from . import protocol as p
from .state import ServerState
from .webrtc_media import pump_track
from .webrtc_peer import OfferRefused, Peer, forget_idle_mdns, ice_configuration
from .webrtc_session import WebRtcConnection


class WebRtcHost:
    def __init__(self, state: ServerState, ice_servers: tuple[str, ...] = ()) -> None:
        self.state = state
        self.ice = ice_configuration(ice_servers)
        self.pending = 0  # answered, channel not yet open
        self._tg: TaskGroup | None = None
        self._live: set[WebRtcConnection] = set()
        self._closed = anyio.Event()

    def full(self) -> bool:
        most = self.state.max_sessions
        return most is not None and self.state.sessions + self.pending >= most

    async def run(self) -> None:
        """The sessions' task group, until ``close``."""
        forget_idle_mdns()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await self._closed.wait()
                tg.cancel_scope.cancel()
        finally:
            forget_idle_mdns()

    async def offer(self, request: Request, sdp: str) -> tuple[str, str]:
        """The answer to ``sdp`` and its session's id; the session then runs
        here. ``OfferRefused``: a bad offer (its peer closed)."""
        if self._tg is None or self._closed.is_set():
            raise OfferRefused("the server is closing")
        peer = Peer(request, self.ice)
        connection = WebRtcConnection(peer, self.state)
        self.pending += 1  # (counted while answering: a burst of offers sees the others)
        try:
            answer = await peer.answer(sdp)
        except BaseException:
            self.pending -= 1
            with anyio.CancelScope(shield=True):
                await peer.aclose()
            raise
        self._tg.start_soon(self._session, connection)
        return answer, connection.id

    async def _session(self, connection: WebRtcConnection) -> None:
        peer, state = connection.peer, self.state
        self._live.add(connection)
        try:
            try:
                with anyio.move_on_after(state.start_timeout_s):
                    await _first(peer.socket.opened, peer.socket.gone)
            finally:
                self.pending -= 1
            if not peer.socket.opened.is_set() or peer.socket.gone.is_set():
                timed_out = not peer.socket.gone.is_set()
                if timed_out:
                    state.metrics.webrtc_offers.labels("ice_timeout").inc()
                state.log(
                    "webrtc_failed",
                    session=connection.id,
                    reason="ice_timeout" if timed_out else "closed",
                    ice=peer.pc.iceConnectionState,
                )
                return
            async with anyio.create_task_group() as tg:
                if peer.remote_track is not None:  # (read from the start: none piles up)
                    tg.start_soon(pump_track, peer.remote_track, connection.hear)
                await connection.run()
                tg.cancel_scope.cancel()
        except Exception as exc:  # a bug: this session ends, the others and the server go on
            state.log("webrtc_failed", session=connection.id, reason="internal", error=repr(exc))
        finally:
            self._live.discard(connection)
            with anyio.CancelScope(shield=True):
                await peer.aclose()

    async def close(self, grace_s: float) -> None:
        """Close every session (1001, as the WebSocket ones), cancel what is
        left after ``grace_s``, and take no more offers."""
        for connection in list(self._live):
            await connection.peer.socket.close(p.CLOSE_GOING_AWAY, "going_away")
        with anyio.move_on_after(grace_s):
            while self._live:
                await anyio.sleep(0.05)
        self._closed.set()


async def _first(*events: anyio.Event) -> None:
    async with anyio.create_task_group() as tg:
        for event in events:
            tg.start_soon(_set_then_cancel, event, tg)


async def _set_then_cancel(event: anyio.Event, tg: TaskGroup) -> None:
    await event.wait()
    tg.cancel_scope.cancel()

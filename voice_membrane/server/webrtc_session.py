"""A protocol session over WebRTC: a ``Connection`` whose socket is the peer's
data channel and whose audio is the peer's tracks.

Everything a ``/v1/session`` client gets — the start and its token, the
pipelines, typed turns, interrupt, push to talk, resume, rate limits, the idle
timeout, drain, the metrics — comes from ``Connection`` unchanged; only the
audio differs: the answer goes out on ``OutboundTrack`` (``TrackSink``), the
client's voice comes in from its track, and both are 48 kHz whatever
``session.start`` asked (a ``session.started`` says so). Binary messages on
the channel are refused: audio goes on the track.
"""

from __future__ import annotations

from typing import cast

import anyio
from websockets.asyncio.server import ServerConnection

from . import protocol as p
from .connection import Connection
from .outbox import Outbox
from .session_store import SessionRecord
from .socket_sink import SocketSink
from .state import ServerState
from .webrtc_media import TRACK_AUDIO, TRACK_INPUT, TrackSink
from .webrtc_peer import Peer


class WebRtcConnection(Connection):
    def __init__(self, peer: Peer, state: ServerState) -> None:
        # The channel stands in for the WebSocket (webrtc_peer.ChannelSocket: the
        # part of ServerConnection a session uses).
        super().__init__(cast(ServerConnection, peer.socket), state)
        self.peer = peer

    async def _serve(
        self, start: p.SessionStart, resumed: tuple[SessionRecord, str] | None = None
    ) -> None:
        listen = None if start.input_audio is None else TRACK_INPUT
        start = start.model_copy(update={"audio": TRACK_AUDIO, "input_audio": listen})
        await super()._serve(start, resumed)

    def _make_sink(self, outbox: Outbox, start: p.SessionStart) -> SocketSink:
        return TrackSink(outbox, self.peer.track)

    def hear(self, data: bytes) -> None:
        """A frame of the client's track (heard once the session listens)."""
        if self.voice is not None and self.session is not None:
            self._take_audio(self.voice, data)

    def _on_audio(self, data: bytes) -> None:
        self._refuse_audio(
            anyio.current_time(), "bad_message", "over WebRTC the voice goes on the audio track"
        )

    async def _watch_reading(self) -> None:
        # The track is read at real time by the peer, and a channel that is not
        # read makes its sends wait (the outbox then drops the client).
        await anyio.sleep_forever()

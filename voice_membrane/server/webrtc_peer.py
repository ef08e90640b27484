"""One WebRTC peer: aiortc's ``RTCPeerConnection`` and the data channel the
session protocol runs on, as the socket a ``Connection`` reads and writes.

``ChannelSocket`` stands in for websockets' ``ServerConnection`` with the
part of it a served session uses: ``recv`` (raises ``ConnectionClosed`` once
the channel or the peer is gone), ``send``, ``close(code, reason)``,
``close_code``, ``request`` (the offer's, for its Authorization header) and
``transport.abort()``. A data channel has no close code: ``close`` sends a
last message, ``{"type": "session.closed", "code", "reason"}``, first.
``Peer.aclose`` closes the peer connection: its ICE sockets, DTLS, SCTP, tracks.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import aioice.ice
import anyio
from aiortc import (
    RTCConfiguration,
    RTCIceServer,
    RTCPeerConnection,
    RTCSessionDescription,
)
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request

from ..infra.redact import remember
from .protocol import CLOSE_NORMAL, MAX_MESSAGE_BYTES
from .webrtc_media import OutboundTrack, tune_jitter_buffer

CHANNEL_QUEUE = 64  # messages read ahead of the session (its rate limit is checked there)
SEND_HIGH_WATER = 256 * 1024  # bytes the channel may hold unsent before a send waits
CLOSE_TOO_BIG = 1009
CLOSE_ABNORMAL = 1006  # as a WebSocket cut without a close frame reports it
TURN_USERNAME_VARIABLE = "VOICE_MEMBRANE_TURN_USERNAME"
TURN_PASSWORD_VARIABLE = "VOICE_MEMBRANE_TURN_PASSWORD"


class OfferRefused(ValueError):
    """An offer that makes no session; one line, safe to answer."""


class ChannelSocket:
    def __init__(self, request: Request) -> None:
        self.request = request
        self.close_code: int | None = None
        self.transport = _Transport(self._aborted)
        self.opened = anyio.Event()
        self.gone = anyio.Event()  # the channel, or the whole peer, is closed
        self._in, self._inbox = anyio.create_memory_object_stream[str | bytes](CHANNEL_QUEUE)
        self._channel: Any = None
        self._sendable = anyio.Event()
        self._sendable.set()

    def attach(self, channel: Any) -> None:
        """The client's data channel (the first one it opens; others are closed)."""
        if self._channel is not None:
            channel.close()
            return
        self._channel = channel
        channel.bufferedAmountLowThreshold = SEND_HIGH_WATER // 2
        channel.on("message", self._message)
        channel.on("close", self.lost)
        channel.on("bufferedamountlow", self._sendable.set)
        if channel.readyState == "open":
            self.opened.set()
        else:
            channel.on("open", self.opened.set)

    def _message(self, data: str | bytes) -> None:
        if len(data) > MAX_MESSAGE_BYTES:
            self._shut(CLOSE_TOO_BIG, "message too big")
            return
        with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError):
            self._in.send_nowait(data)  # (a flood past the queue: dropped, and rate-limited)

    def _aborted(self) -> None:
        if self.close_code is None:
            self.close_code = CLOSE_ABNORMAL
        self.lost()

    def lost(self) -> None:
        """The client closed the channel, or the peer failed or closed."""
        if self.close_code is None:
            self.close_code = CLOSE_NORMAL
        self._in.close()
        self._sendable.set()
        self.gone.set()

    async def recv(self) -> str | bytes:
        try:
            return await self._inbox.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise ConnectionClosed(None, None) from None

    async def send(self, message: str | bytes) -> None:
        channel = self._channel
        if self.gone.is_set() or channel is None or channel.readyState != "open":
            raise ConnectionClosed(None, None)
        while channel.bufferedAmount > SEND_HIGH_WATER and not self.gone.is_set():
            self._sendable = anyio.Event()  # a client that does not read: the outbox fills
            await self._sendable.wait()
        if self.gone.is_set():
            raise ConnectionClosed(None, None)
        channel.send(message)

    async def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        self._shut(code, reason)

    def _shut(self, code: int, reason: str) -> None:
        if self.gone.is_set():
            return
        self.close_code = code
        channel = self._channel
        if channel is not None and channel.readyState == "open":
            closed = {"type": "session.closed", "code": code, "reason": reason}
            with contextlib.suppress(Exception):  # (the transport may be failing under it)
                channel.send(json.dumps(closed))
                channel.close()
        self.lost()


class _Transport:
    """``ws.transport`` as a session uses it: no socket of its own; ``abort``
    (a client dropped that reads nothing, whose close cannot be sent) ends the
    session at once: its reads and a send waiting on the channel end."""

    def __init__(self, abort: Any) -> None:
        self._abort = abort

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def abort(self) -> None:
        self._abort()


def ice_configuration(urls: tuple[str, ...]) -> RTCConfiguration:
    """STUN and TURN servers (``--ice-server``); a TURN server's username and
    password come from the environment, never the command line."""
    username = os.environ.get(TURN_USERNAME_VARIABLE)
    password = os.environ.get(TURN_PASSWORD_VARIABLE)
    remember(password)  # masked in every log line from now on
    servers = [
        RTCIceServer(urls=url, username=username, credential=password)
        if url.startswith(("turn:", "turns:"))
        else RTCIceServer(urls=url)
        for url in urls
    ]
    return RTCConfiguration(iceServers=servers)


class Peer:
    """A peer connection answered for one offer, its outbound track and its channel."""

    def __init__(self, request: Request, ice: RTCConfiguration | None = None) -> None:
        self.pc = RTCPeerConnection(ice or RTCConfiguration())
        self.track = OutboundTrack()
        self.remote_track: Any = None
        self.socket = ChannelSocket(request)
        self.pc.on("datachannel", self.socket.attach)
        self.pc.on("track", self._track)
        self.pc.on("connectionstatechange", self._state)

    def _track(self, track: Any) -> None:
        if track.kind == "audio" and self.remote_track is None:
            self.remote_track = track

    def _state(self) -> None:
        if self.pc.connectionState in ("failed", "closed"):
            self.socket.lost()

    async def answer(self, sdp: str) -> str:
        """The answer to an offer (all candidates gathered: no trickle ICE), or
        ``OfferRefused``."""
        try:
            offer = RTCSessionDescription(sdp=sdp, type="offer")
            await self.pc.setRemoteDescription(offer)
        except RuntimeError:  # the server's state, not the offer (as forget_idle_mdns names)
            raise
        except Exception as exc:  # aiortc's parser raises what it meets (ValueError, KeyError…)
            raise OfferRefused(f"malformed SDP offer: {_one_line(exc)}") from None
        audio = [t for t in self.pc.getTransceivers() if t.kind == "audio"]
        if not audio:
            raise OfferRefused("the offer has no audio (m=audio): the session speaks")
        if self.pc.sctp is None:
            raise OfferRefused("the offer has no data channel (m=application): events run on it")
        self.pc.addTrack(self.track)  # (on the offer's audio transceiver)
        for receiver in self.pc.getReceivers():
            tune_jitter_buffer(receiver)
        answer = await self.pc.createAnswer()
        if "opus/48000" not in answer.sdp.lower():
            raise OfferRefused("no audio codec in common: this server speaks Opus")
        await self.pc.setLocalDescription(answer)
        return str(self.pc.localDescription.sdp)

    async def aclose(self) -> None:
        self.socket.lost()
        self.track.stop()
        await self.pc.close()


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]


def forget_idle_mdns() -> None:
    """Drop aioice's mDNS resolver state when no peer uses it. aioice keeps it
    per thread, and its lock is bound to the event loop where two lookups of a
    browser's ``.local`` candidates first met: on a later loop of the same
    thread (a server started again in one process) every offer with such
    candidates then failed. Called as a server's WebRTC host starts and ends."""
    state = getattr(aioice.ice, "_mdns", None)
    lock = getattr(state, "lock", None)
    if lock is not None and not lock.locked() and getattr(state, "protocol", None) is None:
        vars(state).clear()

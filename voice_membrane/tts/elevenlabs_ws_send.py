"""What the ElevenLabs socket engine sends, and how its sockets are closed.

Flushing. The service buffers text until its chunk schedule is met. A piece is
sent with ``flush: true`` when everything sent before it has been voiced — the
first piece, and any piece after the service went idle — since then waiting
for more text only delays audio. Measured against FakeElevenLabs (100 ms TTFB,
the default 120-character schedule, three pieces 0.3 s apart): first audio
102 ms after the first push with this rule, 1010 ms without flushes (the short
first sentences wait in the buffer until the end of input). A piece that
arrives while the service is still speaking is sent without a flush, so the
service can voice it together with what follows (better prosody), and once
the service has voiced everything flushed so far a bare flush makes it start on
the rest: text never sits in the buffer while the listener waits.
``chunk_length_schedule`` therefore matters only for text that comes faster
than it is spoken (it is sent only when configured).

Keepalive: with no text sent for ``keepalive_s`` (well under
``inactivity_timeout``), a space is sent, so a turn whose LLM waits on a tool
keeps its socket.

Separate from receiving (``elevenlabs_ws_receive``): the sending side is
driven by the turn's pushes and a timer, the receiving side by the service.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from .base import StreamStats
from .elevenlabs_alignment import PieceAttribution
from .elevenlabs_common import ElevenLabsConfig

# An interrupted turn waits at most this long for the close handshake.
CLOSE_TIMEOUT_S = 0.5


async def close_socket(ws: ClientConnection) -> None:
    """Close at once: a short close handshake, then the TCP connection is cut."""
    with anyio.CancelScope(shield=True):
        with anyio.move_on_after(CLOSE_TIMEOUT_S):
            await ws.close()
        if ws.state is not State.CLOSED:
            ws.transport.abort()


class SocketSender:
    """One turn's messages to the service: the settings, the pieces (flushed when
    the service is idle), the end of input, keepalives; each recorded in the
    turn's ``PieceAttribution``."""

    def __init__(
        self,
        config: ElevenLabsConfig,
        attribution: PieceAttribution,
        stats: StreamStats,
        *,
        context_id: str | None,
        keepalive_s: float,
    ) -> None:
        self.config = config
        self.attribution = attribution
        self.stats = stats
        self.context_id = context_id  # multi-context: this turn's context
        self.keepalive_s = keepalive_s
        self.ws: ClientConnection | None = None  # the current connection
        self.ended = False  # end_input() was called
        self.lock = anyio.Lock()  # one sender at a time; a reconnect holds it
        self._last_sent = time.monotonic()  # any text (keepalive included)

    @property
    def multi(self) -> bool:
        return self.context_id is not None

    async def send_init(self) -> None:
        first: dict[str, Any] = {"text": " "}
        settings = self.config.voice_settings()
        if settings is not None:
            first["voice_settings"] = settings
        schedule = self.config.options.chunk_length_schedule
        if schedule is not None:
            first["generation_config"] = {"chunk_length_schedule": list(schedule)}
        await self.send(first, None)

    async def send_piece(self, piece: int, text: str) -> None:
        # The service is idle (everything sent has been voiced): flush, or the
        # text waits in its buffer for more.
        flush = self.attribution.all_voiced
        await self.send({"text": text, "flush": flush}, piece)

    async def send_end(self) -> None:
        if self.multi:
            await self.send({"text": " ", "flush": True}, None)
            await self.send({"close_context": True}, None)
        else:
            await self.send({"text": ""}, None)

    async def resend(self) -> None:
        """On a re-opened connection: the settings, the text not yet voiced, and
        the end of input if it came."""
        await self.send_init()
        for piece, rest in self.attribution.unvoiced():
            await self.send_piece(piece, rest)
        if self.ended:
            await self.send_end()

    async def send(self, message: dict[str, Any], piece: int | None) -> None:
        """Send on the current connection; a closed one is left to the receiver
        (it re-opens and resends what was not voiced)."""
        ws = self.ws
        if ws is None:
            return
        if self.context_id is not None:
            message = {**message, "context_id": self.context_id}
        try:
            await ws.send(json.dumps(message))
        except ConnectionClosed:
            return
        text = message.get("text") or ""
        self.attribution.record_sent(text, piece, flush=bool(message.get("flush")))
        if piece is not None:
            self.stats.chars_billed += len(text)
        self._last_sent = time.monotonic()

    async def flush_if_idle(self) -> None:
        """Everything flushed has been voiced but text sent since waits in the
        service's buffer: make it start on that text now."""
        if self.ended:
            return  # the end of input generates the rest
        if self.attribution.unflushed_waiting:
            async with self.lock:
                await self.send({"text": " ", "flush": True}, None)

    async def keepalive(self) -> None:
        while not self.ended:
            idle = time.monotonic() - self._last_sent
            if idle < self.keepalive_s:
                await anyio.sleep(self.keepalive_s - idle)
                continue
            async with self.lock:
                if not self.ended:
                    # Multi-context: an empty text keeps a context alive.
                    await self.send({"text": "" if self.multi else " "}, None)

"""What the ElevenLabs socket engine receives: audio, errors and the final message.

Each audio message carries the alignment of its own characters
(``sync_alignment=true``), attributed to the pieces as it arrives
(``PieceAttribution``). An error message from the service, a malformed frame,
or nothing received for ``read_timeout_s`` while text is outstanding is one
``TtsError``; a dropped socket is handed back to the stream, which re-opens it.
With ``multi_context``, messages of an earlier turn's closed context are
skipped.

Separate from sending (``elevenlabs_ws_send``): this side runs as the turn's
receiving task and is driven by the service.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from ..infra.eager_next import eager
from ..infra.redact import redact
from .base import StreamStats, TtsError, Voiced
from .elevenlabs_alignment import PieceAttribution
from .elevenlabs_common import AudioDecoder, ElevenLabsConfig
from .elevenlabs_ws_send import SocketSender

# What the stream's reader gets: audio, or the error that ends the turn.
StreamItem = Voiced | TtsError


class SocketReceiver:
    """One turn's messages from the service, as ``Voiced`` items in order; also
    when the service is busy (``stats.busy_ns``) and when it said it is done."""

    def __init__(
        self,
        config: ElevenLabsConfig,
        attribution: PieceAttribution,
        sender: SocketSender,
        stats: StreamStats,
    ) -> None:
        self.config = config
        self.attribution = attribution
        self.sender = sender  # its connection, end of input and idle flushes
        self.stats = stats
        self.finished = False  # the service said isFinal for this turn
        self._decoder = AudioDecoder(config.output_format)
        self._progress = time.monotonic()  # last frame received, or piece / end sent
        # Since when the service has had text it has not voiced (None: it is idle):
        # its time producing audio, for the real-time factor.
        self._busy_from: int | None = None

    def new_connection(self) -> None:
        """A re-opened socket: its audio starts on a sample boundary again."""
        self._decoder = AudioDecoder(self.config.output_format)

    def text_sent(self, *, piece: bool = False) -> None:
        """A piece, the end of input or a resend went out: the read timeout
        counts from now, and a piece keeps the service busy."""
        self._progress = time.monotonic()
        if piece and self._busy_from is None:
            self._busy_from = time.perf_counter_ns()

    async def run(
        self,
        out: MemoryObjectSendStream[StreamItem],
        dropped: Callable[[BaseException], Awaitable[None]],
    ) -> None:
        """Receive until the final message, sending the audio to ``out``; a drop
        is passed to ``dropped`` (which re-opens the socket or raises), an error
        ends ``out`` with it."""
        try:
            while not self.finished:
                ws = self.sender.ws
                assert ws is not None
                try:
                    raw = await self._recv(ws)
                except ConnectionClosed as exc:
                    await dropped(exc)
                    continue
                except OSError as exc:
                    await dropped(exc)
                    continue
                for item in self.read(raw):
                    await out.send(item)
                if not self.finished:
                    await self.sender.flush_if_idle()
        except TtsError as error:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                out.send_nowait(error)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the reader left: the turn ended early
        finally:
            out.close()

    async def _recv(self, ws: ClientConnection) -> str | bytes:
        """The next message; a message already read with others costs no timer
        (``eager``). A wait is polled (``recv`` is safe to cancel), so the
        read timeout runs only while text is outstanding."""
        timeout = self.config.options.read_timeout_s
        poll = min(max(timeout / 4, 0.05), 1.0)
        while True:
            ready, message, rest = eager(ws.recv())
            if ready:
                assert message is not None
                return message
            assert rest is not None
            guard = asyncio.timeout(poll)  # (not anyio's scope: ``eager``'s note)
            try:
                async with guard:
                    return await rest
            except TimeoutError:
                if not guard.expired():
                    raise
            outstanding = self.sender.ended or not self.attribution.all_voiced
            if outstanding and time.monotonic() - self._progress >= timeout:
                raise TtsError(
                    f"ElevenLabs sent nothing for {timeout:g} s with text outstanding "
                    "(tts.read_timeout_s)",
                    retryable=True,
                    kind="timeout",
                )

    def read(self, raw: str | bytes) -> list[Voiced]:
        """The Voiced items of one server message (in order); a TtsError for an
        error message or a malformed frame."""
        try:
            data = json.loads(raw)
        except ValueError:
            raise TtsError("ElevenLabs sent a malformed frame (not JSON)") from None
        if not isinstance(data, dict):
            raise TtsError("ElevenLabs sent a malformed frame (not a JSON object)")
        self._progress = time.monotonic()
        if self.sender.multi:
            context = data.get("contextId", data.get("context_id"))
            if context is not None and context != self.sender.context_id:
                return []  # an earlier turn's closed context, still finishing
        if data.get("error") or (data.get("message") and not data.get("audio")):
            raise service_error(self.config, data)
        items: list[Voiced] = []
        audio = data.get("audio")
        if audio:
            if not isinstance(audio, str):
                raise TtsError("ElevenLabs sent a malformed frame (audio is not text)")
            try:
                data_bytes = base64.b64decode(audio, validate=True)
            except (binascii.Error, ValueError):
                raise TtsError("ElevenLabs sent a malformed frame (audio is not base64)") from None
            alignment = data.get("alignment") or data.get("normalizedAlignment")
            samples = self._decoder.feed(data_bytes)
            items = self.attribution.attribute(samples, alignment, time.perf_counter_ns())
            self._note_busy()
        if data.get("isFinal"):
            self.finished = True
        return items

    def _note_busy(self) -> None:
        if self._busy_from is None:
            return
        now = time.perf_counter_ns()
        self.stats.busy_ns += now - self._busy_from
        self._busy_from = None if self.attribution.all_voiced else now


def service_error(config: ElevenLabsConfig, data: dict[str, Any]) -> TtsError:
    """The ``TtsError`` for an error message from the service."""
    code = str(data.get("error") or "")
    message = str(data.get("message") or "")
    if code in ("invalid_api_key", "missing_api_key", "unauthorized"):
        return config.auth_error(f"socket error {code}")
    if code == "voice_not_found":
        return config.voice_error()
    if code == "input_timeout_exceeded":
        return TtsError(
            "ElevenLabs closed the socket: no text within its inactivity timeout "
            f"({config.options.inactivity_timeout_s} s, input_timeout_exceeded)"
        )
    return TtsError(redact(f"ElevenLabs socket error {code or '?'}: {message}")[:300])

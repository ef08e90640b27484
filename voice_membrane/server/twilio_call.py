"""One phone call on ``/v1/twilio``: Twilio Media Streams in, the listening
pipeline's conversation, the answer back as ``media`` with ``mark`` and ``clear``.

The upgrade was checked before (``twilio_gate``). Twilio sends ``connected``
then ``start`` (the stream's id, μ-law 8 kHz, the pipeline in its custom
parameters), then the caller's audio every 20 ms; the call is one served
session (a slot, the idle timeout, the drain) whose voice goes to
``voice_session.VoiceInput`` and whose audio goes out through ``TwilioSink``.
Twilio takes no events: what a WebSocket client would be told is logged.
The connection's task group owns everything the call runs, so a caller who
hangs up (``stop``, or the line drops) cancels the running turn at once and
nothing outlives the call.
"""

from __future__ import annotations

import contextlib
from contextlib import AsyncExitStack
from typing import Any

import anyio
from anyio.abc import TaskGroup
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ..membrane.tools_mcp import McpServerError
from ..pipeline.build import build_parts, session_for
from ..pipeline.config import ConfigError
from ..sinks.base import SinkError
from ..tts.base import TtsError
from ..vendors.errors import LlmError
from . import protocol as p
from . import twilio_wire as w
from .listening_setup import ListeningFailed, listens
from .outbox import Outbox
from .served_session import ServedSession
from .state import ServerState
from .twilio_sink import MARK_EVERY_S, TwilioSink
from .voice_input import BadAudio

INPUT = p.InputAudio(encoding="mulaw", sample_rate=w.SAMPLE_RATE, frame_ms=w.FRAME_MS)
# Queued audio items a second: 20 ms media and a mark every MARK_EVERY_S.
_ITEMS_PER_S = 1000 // w.FRAME_MS + round(1 / MARK_EVERY_S)


class TwilioCall(ServedSession):
    takes_events = False  # Twilio takes media, marks and clears only: the rest is logged

    def __init__(self, ws: ServerConnection, state: ServerState) -> None:
        super().__init__(ws, state)
        self.sink: TwilioSink | None = None
        self._told_at = -1.0  # when a bad message was last logged

    def _set_sink_turn(self, n: int) -> None:
        assert self.sink is not None
        self.sink.turn = n

    def _audio_sent_s(self) -> float:
        return 0.0 if self.sink is None else self.sink.played_seconds

    # Setup

    async def run(self) -> None:
        state = self.state
        if state.draining.is_set():
            await self._refuse(p.CLOSE_TRY_AGAIN, "draining")
            return
        start = await self._await_start()
        if start is None:
            return
        if state.draining.is_set():
            await self._refuse(p.CLOSE_TRY_AGAIN, "draining")
            return
        name = start.start.customParameters.get("pipeline") or state.default_pipeline
        if name not in state.pipelines:
            await self._refuse(p.CLOSE_POLICY, "pipeline_not_allowed", pipeline=name[:100])
            return
        if not listens(state.pipelines[name]):
            await self._refuse(p.CLOSE_POLICY, "pipeline_does_not_listen", pipeline=name)
            return
        if not state.take_slot():
            state.metrics.errors.labels("full").inc()
            await self._refuse(p.CLOSE_TRY_AGAIN, "full")
            return
        try:
            await self._serve(start, name)
        finally:
            state.release_slot()

    async def _refuse(self, code: int, reason: str, **fields: Any) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.ws.close(code, reason)
        self.state.log("refused", session=self.id, code=code, reason=reason, call=True, **fields)

    async def _await_start(self) -> w.Start | None:
        """Twilio's ``start`` (after ``connected``), or None once the call is closed."""
        with anyio.move_on_after(self.state.start_timeout_s):
            while True:
                try:
                    data = await self.ws.recv()
                except ConnectionClosed:
                    return None
                try:
                    message = w.parse_twilio_message(data)
                except w.BadTwilioMessage as exc:
                    if str(exc).startswith("unsupported media format"):
                        await self._refuse(p.CLOSE_POLICY, "unsupported media format")
                        self.state.log("call_failed", session=self.id, message=str(exc))
                        return None
                    self._bad_message(exc)
                    continue
                if isinstance(message, w.Start):
                    return message
                if isinstance(message, w.Stop):
                    await self._refuse(p.CLOSE_NORMAL, "stop")
                    return None
        await self._refuse(p.CLOSE_IDLE, "idle_timeout")
        return None

    async def _serve(self, start: w.Start, name: str) -> None:
        state = self.state
        config = state.pipelines[name]
        try:
            parts = build_parts(
                config.with_overrides({"sink": {"kind": "null", "realtime": False}}),
                sink_rate=w.SAMPLE_RATE,
            )
        except ConfigError as exc:
            await self._fail(f"pipeline {name}: {exc}")
            return
        self.outbox = outbox = Outbox(
            max(1, round(state.max_queued_audio_s * _ITEMS_PER_S)),
            state.max_queued_events,
            state.max_queued_event_chars,
        )
        self.sink = sink = TwilioSink(outbox, start.stream_sid, on_overflow=self._drop_slow_client)
        self.session = session = session_for(
            config,
            parts,
            sink=sink,
            log=self._on_log,
            on_turn_start=self._session_turn_started,
            conversation_id=self.id,
        )
        async with AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(session)
                await self._listen(stack, config, INPUT, "vad", session)
            except (McpServerError, LlmError, TtsError, SinkError, ListeningFailed) as exc:
                await self._fail(f"pipeline {name}: {exc}")
                return
            await self._call(start, name)

    async def _fail(self, message: str) -> None:
        self.state.log("call_failed", session=self.id, message=message)
        await self._refuse(p.CLOSE_INTERNAL, "internal")

    async def _call(self, start: w.Start, name: str) -> None:
        self.state.log(
            "session_start",
            session=self.id,
            pipeline=name,
            call=True,
            call_sid=start.start.callSid,
            stream_sid=start.stream_sid,
        )
        await self._hold(self._receive)  # a hang-up: the running turn goes with the call

    # The message loop

    async def _receive(self, tg: TaskGroup) -> None:
        assert self.voice is not None and self.sink is not None
        voice, sink = self.voice, self.sink
        while True:
            try:
                data = await self.ws.recv()
            except ConnectionClosed:
                return
            try:
                message = w.parse_twilio_message(data)
            except w.BadTwilioMessage as exc:
                self._bad_message(exc)
                continue
            if isinstance(message, w.Media):
                self._take_audio(voice, message.media.payload)
            elif isinstance(message, w.Mark):
                sink.on_mark(message.mark.name)
            elif isinstance(message, w.Dtmf):
                self.last_activity = anyio.current_time()
                self.state.log("dtmf", session=self.id, turn=self.turn)
            elif isinstance(message, w.Stop):
                self.state.log("hang_up", session=self.id, turn=self.turn)
                return

    def _bad_message(self, exc: Exception) -> None:
        """Logged at most once a second: Twilio has no error event to be told by."""
        now = anyio.current_time()
        self.state.metrics.errors.labels("bad_message").inc()
        if now - self._told_at >= 1.0:
            self._told_at = now
            self.state.log("error", session=self.id, code="bad_message", message=str(exc))

    def _refuse_audio(self, now: float, code: p.ErrorCode, message: str) -> None:
        self._bad_message(BadAudio(message))

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
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
from anyio.abc import TaskGroup
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ..membrane.tools_mcp import McpServerError
from ..pipeline.build import build_parts, session_for
from ..pipeline.config import ConfigError
from ..pipeline.listening import UserTurn
from ..pipeline.session import Session
from ..pipeline.turn import Turn
from ..pipeline.voice_loop import VoiceTurn, turn_record
from ..sinks.base import SinkError
from ..tts.base import TtsError
from ..vendors.errors import LlmError
from . import protocol as p
from . import twilio_wire as w
from .listening_setup import ListeningFailed, listens, voice_input_for
from .outbox import Audio, Close, Outbox
from .rate_limit import Verdict
from .state import ServerState
from .twilio_sink import MARK_EVERY_S, TwilioSink
from .voice_input import AudioBudget, BadAudio
from .voice_session import VoiceInput

INPUT = p.InputAudio(encoding="mulaw", sample_rate=w.SAMPLE_RATE, frame_ms=w.FRAME_MS)
# Queued audio items a second: 20 ms media and a mark every MARK_EVERY_S.
_ITEMS_PER_S = 1000 // w.FRAME_MS + round(1 / MARK_EVERY_S)


class TwilioCall:
    def __init__(self, ws: ServerConnection, state: ServerState) -> None:
        self.ws, self.state = ws, state
        self.id = state.session_id()
        self.turn = 0
        self.turn_done = anyio.Event()
        self.turn_done.set()
        self.last_activity = anyio.current_time()
        self.outbox: Outbox | None = None
        self.sink: TwilioSink | None = None
        self.session: Session | None = None
        self.voice: VoiceInput | None = None
        self.audio_budget = AudioBudget()
        self.dropped = anyio.Event()
        self._starting_turn = False
        self._held = False  # a reply started early runs, not yet the caller's turn
        self._told_at = -1.0  # when a bad message was last logged

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
        self.sink = sink = TwilioSink(outbox, start.stream_sid, on_overflow=self._drop_stalled)
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
                self.voice = await voice_input_for(stack, config, INPUT, "vad", session, self)
            except (McpServerError, LlmError, TtsError, SinkError, ListeningFailed) as exc:
                await self._fail(f"pipeline {name}: {exc}")
                return
            await self._call(start, name)

    async def _fail(self, message: str) -> None:
        self.state.log("call_failed", session=self.id, message=message)
        await self._refuse(p.CLOSE_INTERNAL, "internal")

    async def _call(self, start: w.Start, name: str) -> None:
        assert self.voice is not None
        state = self.state
        started = time.monotonic()
        state.log(
            "session_start",
            session=self.id,
            pipeline=name,
            call=True,
            call_sid=start.start.callSid,
            stream_sid=start.stream_sid,
        )
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.voice.run)
                tg.start_soon(self._sender)
                tg.start_soon(self._idle_watchdog)
                tg.start_soon(self._drain_watch)
                tg.start_soon(self._enforce_drop)
                await self._receive(tg)
                tg.cancel_scope.cancel()  # hung up: the running turn goes with the call
        finally:
            if not self.turn_done.is_set():  # cancelled with the call: never reported
                self._end_turn()
            state.log(
                "session_end",
                session=self.id,
                turns=self.turn,
                seconds=round(time.monotonic() - started, 3),
                close_code=self.ws.close_code,
            )

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
                self._on_audio(voice, message.media.payload)
            elif isinstance(message, w.Mark):
                sink.on_mark(message.mark.name)
            elif isinstance(message, w.Dtmf):
                self.last_activity = anyio.current_time()
                self.state.log("dtmf", session=self.id, turn=self.turn)
            elif isinstance(message, w.Stop):
                self.state.log("hang_up", session=self.id, turn=self.turn)
                return

    def _on_audio(self, voice: VoiceInput, payload: bytes) -> None:
        try:
            voice.decoder.check(payload)
        except BadAudio as exc:
            self._bad_message(exc)
            return
        now = anyio.current_time()
        verdict = self.audio_budget.take(voice.decoder.seconds(payload), now)
        if verdict is Verdict.ACCEPT:
            voice.feed(payload)
        elif verdict is Verdict.DISCONNECT:
            self.state.metrics.errors.labels("rate_limited").inc()
            self._close(p.CLOSE_POLICY, "rate_limited")
        elif verdict is Verdict.REFUSE:
            self.state.log("error", session=self.id, code="rate_limited", call=True)

    def _bad_message(self, exc: Exception) -> None:
        """Logged at most once a second: Twilio has no error event to be told by."""
        now = anyio.current_time()
        self.state.metrics.errors.labels("bad_message").inc()
        if now - self._told_at >= 1.0:
            self._told_at = now
            self.state.log("error", session=self.id, code="bad_message", message=str(exc))

    # Turns (all spoken; numbered as a WebSocket session's)

    def _begin_turn(self, held: bool) -> None:
        assert self.sink is not None
        self.turn += 1
        self.turn_done = anyio.Event()
        self.sink.turn = self.turn
        self.state.turns_running += 1
        self._starting_turn = not held
        self._held = held

    def _end_turn(self) -> None:
        self._starting_turn = self._held = False
        self.state.turns_running -= 1
        self.last_activity = anyio.current_time()
        self.turn_done.set()

    def _session_turn_started(self, turn: Turn) -> None:
        """A turn the caller's words did not announce: a reply held for a tentative end."""
        if self._starting_turn:
            self._starting_turn = False
        else:
            self._begin_turn(held=True)

    # What the listening half reports (voice_session.VoiceHooks)

    def event(self, text: str) -> None:
        """A listening event: Twilio takes none (the turn's log lines say what matters)."""

    def speech_started(self) -> None:
        self.last_activity = anyio.current_time()

    def voice_turn_started(self, heard: UserTurn) -> None:
        if self._held:
            self._held = False  # the held reply is the caller's: heard from now
        else:
            self._begin_turn(held=False)
        self.state.metrics.turns.inc()
        self.state.log(
            "turn_start", session=self.id, turn=self.turn, chars=len(heard.text), source="voice"
        )

    def voice_turn_ended(self, turn: VoiceTurn) -> None:
        result, record = turn.result, turn_record(turn)
        first_audio = result.report.first_audio_ms
        if first_audio is not None:
            self.state.metrics.first_audio.observe(first_audio / 1000)
        self.state.log(
            "turn_end",
            session=self.id,
            turn=self.turn,
            first_audio_ms=None if first_audio is None else round(first_audio, 1),
            audio_seconds=round(result.report.audio_seconds, 3),
            interrupted=result.interrupted,
            error=result.error,
            voice_to_voice=record["voice_to_voice"],
        )
        self._end_turn()

    def held_reply_discarded(self) -> None:
        if self._held:  # never the caller's: its number is reused
            self.turn -= 1
            self._end_turn()

    def barge_in(self, action: str, text: str | None) -> None:
        if not self.turn_done.is_set() and not self._held:
            self.state.log("barge_in", session=self.id, turn=self.turn, action=action)

    async def wait_idle(self) -> None:
        await self.turn_done.wait()  # (a call has no typed turn to interrupt)

    def _on_log(self, record: dict[str, Any]) -> None:
        """The pipeline's own log records: a WebSocket client's events; not a call's."""

    # Sending, closing

    def _close(self, code: int, reason: str) -> None:
        assert self.outbox is not None
        if self.session is not None:
            self.session.interrupt()
        self.outbox.close(code, reason)

    async def _sender(self) -> None:
        assert self.outbox is not None
        while True:
            item = await self.outbox.get()
            try:
                if isinstance(item, Close):
                    await self.ws.close(item.code, item.reason)
                    return
                await self.ws.send(item.data if isinstance(item, Audio) else item)
            except ConnectionClosed:
                return

    def _drop_stalled(self) -> None:
        """Twilio stopped reading: the call is closed rather than buffer without end."""
        if self.dropped.is_set():
            return
        self.dropped.set()
        self.state.metrics.dropped.inc()
        self.state.log("dropped", session=self.id, turn=self.turn, reason="slow_client")
        assert self.outbox is not None
        self.outbox.close(p.CLOSE_POLICY, "slow_client", discard=True)

    async def _enforce_drop(self) -> None:
        await self.dropped.wait()
        await anyio.sleep(self.state.close_timeout_s)
        self.ws.transport.abort()

    async def _idle_watchdog(self) -> None:
        """A silent caller: Twilio's media never stop, so only speech (or a key)
        counts as activity."""
        timeout = self.state.idle_timeout_s
        while True:
            await self.turn_done.wait()
            remaining = self.last_activity + timeout - anyio.current_time()
            if remaining <= 0 and self.turn_done.is_set():
                self.state.metrics.errors.labels("idle_timeout").inc()
                self.state.log("idle_timeout", session=self.id)
                self._close(p.CLOSE_IDLE, "idle_timeout")
                return
            await anyio.sleep(max(remaining, 0.01))

    async def _drain_watch(self) -> None:
        state = self.state
        await state.draining.wait()
        with anyio.move_on_after(state.drain_deadline - anyio.current_time()):
            await self.turn_done.wait()
        self._close(p.CLOSE_GOING_AWAY, "server shutting down")

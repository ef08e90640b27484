"""One phone call, whatever its carrier: the carrier's media stream in, the
listening pipeline's conversation, the answer back as media with marks and clear.

The carrier's dialect is its wire (``carrier_wire.CarrierWire``: Twilio's,
Telnyx's, Plivo's); the call sees only the common events. The upgrade was
checked before (the carrier's gate). The carrier sends its ``start`` (the
stream's id, μ-law 8 kHz, the pipeline and the call's token in its custom
parameters), then the caller's audio every 20 ms; the call is one served
session (a slot, the idle timeout, the drain) whose voice goes to
``voice_session.VoiceInput`` and whose audio goes out through ``PhoneSink``.
A carrier takes no events: what a WebSocket client would be told is logged.
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
from ..sinks.base import SinkError
from ..tts.base import TtsError
from ..vendors.errors import LlmError
from . import protocol as p
from .admission import close_discarding
from .carrier_wire import (
    FRAME_MS,
    SAMPLE_RATE,
    BadCarrierMessage,
    CallAudio,
    CallStart,
    CarrierNotice,
    CarrierWire,
    HungUp,
    KeyPress,
    Played,
    UnsupportedFormat,
)
from .listening_setup import ListeningFailed, listens
from .outbox import Outbox
from .phone_sink import MARK_EVERY_S, PhoneSink
from .rate_limit import RateLimit, Verdict
from .served_session import ServedSession
from .state import ServerState
from .twilio_call_token import CALL_TOKEN_PARAMETER, CallTokens
from .voice_input import BadAudio
from .voice_session import VoiceInput

# A call's messages besides its good audio (checked by the audio budget): marks
# come back 10 a second and keys are pressed by hand, so more than this in a
# second is a flood; its excess is dropped, and one that goes on is closed.
MESSAGES_PER_S = 50
INPUT = p.InputAudio(encoding="mulaw", sample_rate=SAMPLE_RATE, frame_ms=FRAME_MS)
# Queued audio items a second: 20 ms media and a mark every MARK_EVERY_S.
_ITEMS_PER_S = 1000 // FRAME_MS + round(1 / MARK_EVERY_S)


class PhoneCall(ServedSession):
    takes_events = False  # a carrier takes media, marks and clears only: the rest is logged
    lives_through_drain = True  # a stream cannot resume elsewhere: a restart would hang up

    def __init__(
        self,
        ws: ServerConnection,
        state: ServerState,
        wire: CarrierWire,
        call_tokens: CallTokens | None,
    ) -> None:
        """``call_tokens``: with the carrier's secret configured, what a ``start``
        must redeem (the signature or token of the upgrade alone can be replayed)."""
        super().__init__(ws, state)
        self.wire, self.call_tokens = wire, call_tokens
        self.sink: PhoneSink | None = None
        self._early_told = False
        self._told_at = -1.0  # when a bad message was last logged
        self._messages = RateLimit(MESSAGES_PER_S)  # all but the caller's good audio
        self._flooded = False  # closed for it
        self._keys = KeyTally()

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
        if self.call_tokens is not None:  # the signature alone can be replayed
            token = start.parameters.get(CALL_TOKEN_PARAMETER)
            why = self.call_tokens.redeem(start.call_id, token, time.time())
            if why is not None:
                state.metrics.errors.labels("unauthorized").inc()
                await self._refuse(p.CLOSE_UNAUTHORIZED, "unauthorized", message=why)
                return
        name = start.parameters.get("pipeline") or state.default_pipeline
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
        # Logged first, then closed reading what the caller still sends (a flood
        # would hold the close for its whole timeout): nothing else reads yet.
        self.state.log("refused", session=self.id, code=code, reason=reason, call=True, **fields)
        await close_discarding(self.ws, code, reason)

    async def _await_start(self) -> CallStart | None:
        """The carrier's ``start`` (after ``connected``), or None once the call is
        closed. The wait only decides: a refusal runs after its deadline, so
        the deadline never cuts one short and closes the call a second time."""
        outcome = await self._first_start()
        if outcome is None or isinstance(outcome, CallStart):
            return outcome
        await self._refuse(*outcome)
        return None

    async def _first_start(self) -> CallStart | tuple[int, str] | None:
        """The ``start``, the refusal it ended in (code, reason), or None: closed."""
        with anyio.move_on_after(self.state.start_timeout_s):
            while True:
                try:
                    data = await self.ws.recv()
                except ConnectionClosed:
                    return None
                if self._over_limit():
                    if self._flooded:
                        return p.CLOSE_POLICY, "rate_limited"
                    continue
                try:
                    message = self.wire.parse(data)
                except UnsupportedFormat as exc:
                    self.state.log("call_failed", session=self.id, message=str(exc))
                    return p.CLOSE_POLICY, "unsupported media format"
                except BadCarrierMessage as exc:
                    self._bad_message(exc)
                    continue
                if isinstance(message, CallStart):
                    return message
                if isinstance(message, HungUp):
                    return p.CLOSE_NORMAL, "stop"
                early = isinstance(message, CallAudio | Played | KeyPress)
                if early and not self._early_told:
                    # Out of order: the carrier has not said which call this is yet.
                    self._early_told = True
                    self._bad_message(BadCarrierMessage("a message before start: dropped"))
                elif isinstance(message, CarrierNotice):
                    self._carrier_notice(message)
        return p.CLOSE_IDLE, "idle_timeout"

    async def _serve(self, start: CallStart, name: str) -> None:
        state = self.state
        config = state.pipelines[name]
        try:
            parts = build_parts(
                config.with_overrides({"sink": {"kind": "null", "realtime": False}}),
                sink_rate=SAMPLE_RATE,
            )
        except ConfigError as exc:
            await self._fail(f"pipeline {name}: {exc}")
            return
        self.outbox = outbox = Outbox(
            max(1, round(state.max_queued_audio_s * _ITEMS_PER_S)),
            state.max_queued_events,
            state.max_queued_event_chars,
        )
        self.sink = sink = PhoneSink(
            outbox, start.stream_id, self.wire, on_overflow=self._drop_slow_client
        )
        header = {"pipeline": name, "carrier": self.wire.name, "call_sid": start.call_id}
        self.session = session = session_for(
            config,
            parts,
            sink=self._recorded(sink, config, **header),
            log=self._on_log,
            on_turn_start=self._session_turn_started,
            conversation_id=self.id,
        )
        async with AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(session)
                await self._listen(stack, config, INPUT, "vad", session, "call")
                if self.voice is not None and self.voice.echo is not None:
                    sink.on_sent = self.voice.echo.sent  # the caller's echo's reference
            except (McpServerError, LlmError, TtsError, SinkError, ListeningFailed) as exc:
                await self._fail(f"pipeline {name}: {exc}")
                return
            await self._call(start, name)

    async def _fail(self, message: str) -> None:
        self.state.log("call_failed", session=self.id, message=message)
        await self._refuse(p.CLOSE_INTERNAL, "internal")

    async def _call(self, start: CallStart, name: str) -> None:
        self.state.log(
            "session_start",
            session=self.id,
            pipeline=name,
            call=True,
            carrier=self.wire.name,
            call_sid=start.call_id,
            stream_sid=start.stream_id,
        )
        await self._hold(self._receive)  # a hang-up: the running turn goes with the call

    # The message loop

    async def _receive(self, tg: TaskGroup) -> None:
        assert self.voice is not None and self.sink is not None
        voice, sink = self.voice, self.sink
        try:
            await self._messages_of_the_call(voice, sink)
        finally:
            if presses := self._keys.flush():
                self.state.log("dtmf", session=self.id, turn=self.turn, presses=presses)

    async def _messages_of_the_call(self, voice: VoiceInput, sink: PhoneSink) -> None:
        while True:
            if self._flooded:  # closed, and nothing more of it is read
                with contextlib.suppress(ConnectionClosed):
                    await self.ws.close(p.CLOSE_POLICY, "rate_limited")
                return
            try:
                data = await self.ws.recv()
            except ConnectionClosed:
                return
            try:
                message = self.wire.parse(data)
            except BadCarrierMessage as exc:
                if not self._over_limit():
                    self._bad_message(exc)
                continue
            if isinstance(message, CallAudio):
                self._take_audio(voice, message.audio)  # (bad audio: counted)
            elif isinstance(message, HungUp):
                self.state.log("hang_up", session=self.id, turn=self.turn)
                return
            elif self._over_limit():
                continue
            elif isinstance(message, Played):
                if not sink.on_mark(message.name):
                    self._bad_message(BadCarrierMessage("a mark this call never sent: ignored"))
            elif isinstance(message, KeyPress):
                now = self.last_activity = anyio.current_time()
                if presses := self._keys.press(now):  # a line a second at most
                    self.state.log("dtmf", session=self.id, turn=self.turn, presses=presses)
            elif isinstance(message, CallStart):
                self._bad_message(BadCarrierMessage("a second start: ignored"))
            elif isinstance(message, CarrierNotice):
                self._carrier_notice(message)

    def _over_limit(self) -> bool:
        """Count one message that is not good audio: True when it is to be dropped
        (a flood; one that goes on is ``_flooded``: the caller closes it)."""
        verdict = self._messages.check(anyio.current_time())
        if verdict is Verdict.ACCEPT:
            return False
        if verdict is Verdict.REFUSE:
            self.state.log(
                "error",
                session=self.id,
                code="rate_limited",
                message=f"over {MESSAGES_PER_S} messages a second besides the audio: dropped",
            )
        elif verdict is Verdict.DISCONNECT and not self._flooded:
            self._flooded = True
            self.state.metrics.errors.labels("rate_limited").inc()
            self.state.log("error", session=self.id, code="rate_limited", message="closed")
        return True

    def _carrier_notice(self, notice: CarrierNotice) -> None:
        """The carrier reports an error of its own (Telnyx's ``error``): logged,
        as a bad message is (at most a line a second)."""
        said = BadCarrierMessage(f"{self.wire.name} says: {notice.text}")
        self._bad_message(said, "carrier_error")

    def _bad_message(self, exc: Exception, code: str = "bad_message") -> None:
        """Logged at most once a second: a carrier has no error event to be told by."""
        now = anyio.current_time()
        self.state.metrics.errors.labels("bad_message").inc()
        if now - self._told_at >= 1.0:
            self._told_at = now
            self.state.log("error", session=self.id, code=code, message=str(exc))

    def _refuse_audio(self, now: float, code: p.ErrorCode, message: str) -> None:
        if not self._over_limit():
            self._bad_message(BadAudio(message))


class KeyTally:
    """Keypresses logged at most once a second, with how many there were
    (sans-I/O: the caller passes the time): a caller holding a key down, or a
    flood of ``dtmf``, is a line a second, not a line a press."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self._told_at = -float("inf")
        self._untold = 0

    def press(self, now: float) -> int:
        """The presses to log now (this one and those not yet logged), or 0."""
        self._untold += 1
        if now - self._told_at < self.every_s:
            return 0
        self._told_at = now
        return self.flush()

    def flush(self) -> int:
        untold, self._untold = self._untold, 0
        return untold

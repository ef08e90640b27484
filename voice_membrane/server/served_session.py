"""What every served conversation shares, whatever its wire: a protocol client
on ``/v1/session`` (``connection.Connection``) or a phone call on
``/v1/twilio`` (``twilio_call.TwilioCall``).

The session's send queue and its sender, the client dropped when it stops
reading, the idle and drain watchdogs (``watchdogs.py``), the listening half
(``VoiceInput``) and its hooks, and the turns: typed and spoken turns and the
greeting numbered and reported alike,
a reply started early for a spoken turn (held, unheard) kept unannounced — its
events held back — until it is the user's turn, and its number given back if
it is thrown away. A wire that takes no events (``takes_events`` False: a
phone call) has them dropped here and logged instead.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack
from typing import Any, ClassVar

import anyio
from anyio.abc import TaskGroup
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ..pipeline.config import PipelineConfig
from ..pipeline.echo_intake import Where
from ..pipeline.listening import UserTurn
from ..pipeline.session import Session
from ..pipeline.session_recording import SessionRecorder
from ..pipeline.turn import Turn, TurnResult
from ..pipeline.voice_loop import VoiceTurn, turn_record
from ..sinks.base import AudioSink
from . import protocol as p
from .batch_send import send_batch
from .listening_setup import voice_input_for
from .loop_lag import loop_clock
from .outbox import Audio, Barrier, Close, Item, Outbox
from .rate_limit import Verdict
from .state import ServerState
from .turn_events import log_event, turn_end_events, turn_end_log
from .voice_input import AudioBudget, BadAudio
from .voice_session import VoiceInput, input_recording
from .watchdogs import drain_watch, idle_watchdog

# How long a turn running when the client left has to end as an interruption
# (what was heard kept) before it is cancelled with the session.
SETTLE_S = 2.0
BATCH_FRAMES = 15  # frames per socket write at most: 300 ms of 20 ms frames


class ServedSession:
    takes_events: ClassVar[bool] = True  # the wire carries JSON events (a phone call: no)
    # On drain, the session goes on until it ends (up to the drain deadline), not
    # just its running turn: a phone call cannot be resumed on another server.
    lives_through_drain: ClassVar[bool] = False

    def __init__(self, ws: ServerConnection, state: ServerState) -> None:
        self.ws, self.state = ws, state
        self.id = state.session_id()
        self.turn = 0
        self.turn_scope: anyio.CancelScope | None = None  # a typed turn's
        self.turn_done = anyio.Event()
        self.turn_done.set()
        self._clock = loop_clock()  # (read on every audio frame)
        now = self.last_activity = self._clock()  # (the budget's clock starts here too)
        self.dropped = anyio.Event()
        self.outbox: Outbox | None = None
        self.session: Session | None = None
        self.voice: VoiceInput | None = None  # the client sends its voice
        self.audio_budget = AudioBudget(now=now, stalled=state.loop_lag.stalled(now))
        self._audio_told_at = -1.0  # when the client was last told its audio is refused
        self._starting_turn = False  # the next session turn is announced (not a held reply)
        self._held_events: list[str] | None = None  # a held reply's, until it is the user's
        self._audio_counted_s = 0.0  # of the sink's audio, what the metrics have counted
        self._left = False  # the client left (or was closed): nothing more is sent
        self.recorder: SessionRecorder | None = None  # ``[recording]``: ``_recorded``

    # The listening half and the session's tasks

    async def _listen(
        self,
        stack: AsyncExitStack,
        config: PipelineConfig,
        declared: p.InputAudio,
        turn_taking: p.TurnTaking,
        session: Session,
        where: Where = "browser",
    ) -> None:
        """Build the listening parts (``ListeningFailed`` in one line); the input is
        written to the debug folder when there is one."""
        self.voice = voice = await voice_input_for(
            stack, config, declared, turn_taking, session, self, where
        )
        stack.enter_context(self.state.heartbeat.held())  # the lag its audio budget credits
        if self.recorder is not None:
            voice.on_frame = self.recorder.user_frame
        if self.state.debug_audio_dir is not None:
            path = self.state.debug_audio_dir / f"{self.id}.wav"
            voice.record_to(stack.enter_context(input_recording(path, voice)))

    def _recorded(self, sink: AudioSink, config: PipelineConfig, **header: Any) -> AudioSink:
        """The session's sink, its audio written down as heard when the pipeline
        records (``[recording]``); ``header``: what the transcript's first line says."""
        if config.recording.dir is None:
            return sink
        self.recorder = SessionRecorder(config.recording, self.id, header, self.state.log)
        return self.recorder.wrap(sink)

    async def _hold(
        self,
        receive: Callable[[TaskGroup], Coroutine[Any, Any, None]],
        *tasks: Callable[[], Coroutine[Any, Any, None]],
    ) -> None:
        """Run the session until ``receive`` returns (the client left or was
        closed): everything it started is cancelled with it."""
        started = time.monotonic()
        recording = self.recorder.opened() if self.recorder else contextlib.nullcontext()
        try:
            with recording:  # (a recording's files: open while the conversation is held)
                async with anyio.create_task_group() as tg:
                    if self.voice is not None:
                        tg.start_soon(self.voice.run)
                    tg.start_soon(idle_watchdog, self)
                    tg.start_soon(drain_watch, self)
                    for task in (self._sender, self._enforce_drop, *tasks):
                        tg.start_soon(task)
                    self._greet(tg)
                    await receive(tg)
                    self._left = True
                    await self._settle_turn()
                    tg.cancel_scope.cancel()
        finally:
            if not self.turn_done.is_set():  # a spoken turn, cancelled with the session
                self._end_turn()
            self.state.log(
                "session_end",
                session=self.id,
                turns=self.turn,
                seconds=round(time.monotonic() - started, 3),
                close_code=self.ws.close_code,
            )

    async def _settle_turn(self) -> None:
        """A turn running when the client left ends as an interruption, not
        cancelled, so what was heard of it stays in the history (a resumed
        session goes on from it); bounded by the close timeout."""
        session = self.session
        if session is None or self._held_events is not None:
            return  # (a held reply was never heard: it goes with the session)
        with anyio.move_on_after(SETTLE_S):
            while not self.turn_done.is_set():
                session.interrupt()  # (a spoken turn's reply may start a moment later)
                with anyio.move_on_after(0.05):
                    await self.turn_done.wait()

    # Turns, typed or spoken

    def _begin_turn(self, text: str, source: str, held: bool = False) -> None:
        """Number the next turn and count it as running; announce it unless it is
        a held reply (``voice_turn_started`` announces it once it is the user's)."""
        self.turn += 1
        self.turn_done = anyio.Event()
        self._set_sink_turn(self.turn)
        self.state.turns_running += 1
        self.state.metrics.active_turns.inc()
        self._starting_turn = not held
        if held:
            self._held_events = []
            return
        self._announce(text, source)

    def _greet(self, tg: TaskGroup) -> None:
        """A new conversation whose pipeline has a greeting opens with it, as a
        turn of its own (source ``greeting``, no user text): speech over it
        pauses and interrupts it as over any reply; a resumed one does not."""
        session = self.session
        if session is None or session.greeting is None or session.turns:
            return
        if self.state.draining.is_set():
            return
        self._begin_turn("", "greeting")
        tg.start_soon(self._run_turn, self.turn, session.greet)

    async def _run_turn(self, n: int, run: Callable[[], Awaitable[TurnResult | None]]) -> None:
        """A turn of the session's own (typed, or its greeting): reported as it
        ends; a running one is cut by ``turn_scope`` (the session closing)."""
        voice = self.voice
        if voice is not None:  # its echo and barge-in, as a spoken turn's
            voice.listener.assistant_speaking(True)
        try:
            with anyio.CancelScope() as scope:
                self.turn_scope = scope
                try:
                    result = await run()
                except Exception as exc:  # a bug: the session goes on, the client is told
                    self.state.log("turn_failed", session=self.id, turn=n, error=repr(exc))
                    self._error("internal", "the turn failed inside the server", n)
                    return
                if result is not None:
                    self._report_turn(n, result, result.report.to_dict())
        finally:
            if voice is not None:
                voice.listener.assistant_speaking(False)
            self._end_turn()

    def _set_sink_turn(self, n: int) -> None:
        """The sink's frames carry the turn they belong to."""

    def _audio_sent_s(self) -> float:
        """Seconds of audio the session's sink has sent so far (for the metrics)."""
        return 0.0

    def _announce(self, text: str, source: str) -> None:
        if self.recorder is not None and source == "text":  # (a spoken one: as it was said)
            self.recorder.said(text, self.turn, source)
        self.state.metrics.turns.inc()
        self.state.log(
            "turn_start", session=self.id, turn=self.turn, chars=len(text), source=source
        )
        self._put(p.event("turn.started", turn=self.turn, text=text, source=source))
        self._turn_announced(text)

    def _end_turn(self) -> None:
        self._starting_turn = False
        self._held_events = None
        self.turn_scope = None
        self.state.turns_running -= 1
        self.state.metrics.active_turns.dec()
        self.last_activity = anyio.current_time()
        self.turn_done.set()
        self._turn_over()

    # What a session kept for resuming hears (``Connection``; a phone call: nothing)

    def _turn_announced(self, text: str) -> None:
        """The turn ``self.turn`` is the user's and runs."""

    def _turn_reported(self, n: int, result: TurnResult) -> None:
        """Turn ``n`` ended with ``result`` (its history record is written)."""

    def _turn_over(self) -> None:
        """No turn runs (one ended, or a held reply was thrown away)."""

    def _session_turn_started(self, turn: Turn) -> None:
        """Every turn of the session, as it starts: one not announced before is a
        reply held for a tentative end of the user's speech."""
        if self._starting_turn:
            self._starting_turn = False
        else:
            self._begin_turn("", "voice", held=True)

    def _report_turn(
        self,
        n: int,
        result: TurnResult,
        report_dict: dict[str, Any],
        voice_to_voice: dict[str, Any] | None = None,
    ) -> None:
        state, report = self.state, result.report
        self._turn_reported(n, result)
        if self.recorder is not None:
            self.recorder.answered(n, result)
        for event in turn_end_events(n, result, report_dict):
            self._put(event)
        llm_failed = result.reply is None or result.reply.error is not None
        if result.error:
            kind = report.llm_error if llm_failed else None  # ("stalled", …)
            self._error("llm_error" if llm_failed else "tts_error", result.error, n, kind)
        state.metrics.observe_turn(
            report,
            llm_failed=bool(result.error) and llm_failed,
            tts_failed=bool(result.error) and not llm_failed,
        )
        sent_s = self._audio_sent_s()  # the session's so far: this turn's is the growth
        state.metrics.audio_seconds.inc(max(0.0, sent_s - self._audio_counted_s))
        self._audio_counted_s = sent_s
        state.log(
            "turn_end", session=self.id, **turn_end_log(n, result, report_dict, voice_to_voice)
        )

    # What the listening half reports (voice_session.VoiceHooks)

    def event(self, text: str) -> None:
        self._put(text)

    def speech_started(self) -> None:
        self.last_activity = anyio.current_time()

    def stt_failed(self, message: str) -> None:
        self._error("stt_error", message)  # (logged and counted; a call takes no event)

    def utterance_capped(self, at_ms: float, max_s: float) -> None:
        self.state.log("utterance_capped", session=self.id, at_ms=at_ms, max_utterance_s=max_s)
        self._put(p.event("utterance_capped", at_ms=at_ms, max_utterance_s=max_s))

    def no_words(self, at_ms: float, speech_ms: float) -> None:
        self.state.log("no_words", session=self.id, at_ms=at_ms, speech_ms=speech_ms)
        self._put(p.event("no_words", at_ms=at_ms, speech_ms=speech_ms))

    def voice_turn_started(self, heard: UserTurn) -> None:
        if self._held_events is not None:  # the held reply is the user's: heard from now
            held, self._held_events = self._held_events, None
            self._announce(heard.text, "voice")
            for text in held:
                self._put(text)
        else:
            self._begin_turn(heard.text, "voice")
        if self.recorder is not None:  # as it was said
            self.recorder.said(heard.text, self.turn, "voice", heard.speech_start_ns)

    def voice_turn_ended(self, turn: VoiceTurn) -> None:
        record = turn_record(turn)
        self._report_turn(self.turn, turn.result, record, record["voice_to_voice"])
        if turn.latency.voice_to_voice_ms is not None:
            self.state.metrics.voice_to_voice.observe(turn.latency.voice_to_voice_ms / 1000)
        self._end_turn()

    def held_reply_discarded(self) -> None:
        if self._held_events is not None:  # never announced: its number is reused
            self.turn -= 1
            self._end_turn()

    def barge_in(self, action: str, text: str | None) -> None:
        if self.turn_done.is_set() or self._held_events is not None:
            return  # nothing of the assistant's is heard
        fields: dict[str, Any] = {"turn": self.turn, "action": action}
        if text is not None:
            fields["text"] = text
        self.state.log("barge_in", session=self.id, turn=self.turn, action=action)
        self._put(p.event("barge_in", **fields))

    async def wait_idle(self) -> None:
        """Before a spoken turn: a typed one still running is interrupted (the
        user spoke over it) and its end awaited."""
        while not self.turn_done.is_set():
            if self.session is not None:
                self.session.interrupt()
            await self.turn_done.wait()

    # The client's voice

    def _take_audio(self, voice: VoiceInput, data: bytes) -> None:
        """One frame of the client's voice: checked, within the audio budget, heard."""
        now = self._clock()
        try:
            voice.decoder.check(data)
        except BadAudio as exc:
            self._refuse_audio(now, "bad_message", f"audio frame: {exc}")
            return
        seconds, stalled = voice.decoder.seconds(data), self.state.loop_lag.stalled(now)
        verdict = self.audio_budget.take(seconds, now, stalled)
        if verdict is Verdict.ACCEPT:
            voice.feed(data)
        elif verdict is Verdict.DISCONNECT:
            self.state.metrics.errors.labels("rate_limited").inc()
            self.close(p.CLOSE_POLICY, "rate_limited")
        elif verdict is Verdict.REFUSE:
            self._error(
                "rate_limited",
                f"audio faster than real time: at most {self.audio_budget.burst_s:g} s ahead; "
                "the audio over it is dropped",
            )

    def _refuse_audio(self, now: float, code: p.ErrorCode, message: str) -> None:
        """Frames come 50 a second: a client that sends bad ones is told once a second."""
        if now - self._audio_told_at >= 1.0:
            self._audio_told_at = now
            self._error(code, message)

    # What the pipeline reports, as events

    def _on_piece_start(self, text: str) -> None:
        self._put_turn_event(p.event("transcript.delta", turn=self.turn, text=text))

    def _on_log(self, record: dict[str, Any]) -> None:
        if not self.takes_events:
            return
        event = log_event(self.turn, record)
        if event is not None:
            self._put_turn_event(event)

    def _put_turn_event(self, text: str) -> None:
        if self._held_events is not None:
            if self.takes_events:
                self._held_events.append(text)  # (bounded by the outbox once released)
        else:
            self._put(text)

    # Sending

    def _put(self, item: Item) -> None:
        assert self.outbox is not None
        if self._left or (isinstance(item, str) and not self.takes_events):
            return  # (what matters of it is in the log)
        if not self.outbox.put(item):
            self._drop_slow_client()

    def _error(
        self, code: p.ErrorCode, message: str, turn: int | None = None, kind: str | None = None
    ) -> None:
        self.state.metrics.errors.labels(code).inc()
        self.state.log("error", session=self.id, code=code, message=message, turn=turn)
        self._put(p.error_event(code, message, turn, kind))

    def close(self, code: int, reason: str, *events: str, discard: bool = False) -> None:
        assert self.outbox is not None
        if self.turn_scope is not None:
            self.turn_scope.cancel()
        if not self.takes_events:
            events = ()
        self.outbox.close(code, reason, *events, discard=discard)

    async def _sender(self) -> None:
        assert self.outbox is not None
        while True:
            item = await self.outbox.get()
            try:
                if isinstance(item, Close):
                    await self.ws.close(item.code, item.reason)
                    return
                if isinstance(item, Audio):  # and the frames queued behind it, in one write
                    await send_batch(self.ws, [item.data, *self.outbox.take_audio(BATCH_FRAMES)])
                elif isinstance(item, Barrier):
                    with anyio.move_on_after(item.most_s):
                        await item.passed.wait()
                else:
                    await self.ws.send(item)
            except ConnectionClosed:
                return

    def _drop_slow_client(self) -> None:
        if self.dropped.is_set():
            return
        self.dropped.set()
        self.state.metrics.dropped.inc()
        self.state.metrics.errors.labels("slow_client").inc()
        self.state.log("dropped", session=self.id, turn=self.turn, reason="slow_client")
        late = p.error_event("slow_client", "the client did not take its audio in time")
        self.close(p.CLOSE_POLICY, "slow_client", late, discard=True)

    async def _enforce_drop(self) -> None:
        """A dropped client that never reads again cannot be sent its close frame:
        after the close timeout the connection is cut."""
        await self.dropped.wait()
        await anyio.sleep(self.state.close_timeout_s)
        self.ws.transport.abort()

"""One WebSocket connection: authentication, the session, its turns, its limits.

The connection's task group owns everything the session does — the sender,
the watchdogs, the running turn and, when the client sends its voice, the
listening (``voice_session.VoiceInput``) — so a client that disconnects cancels
its turn (LLM, TTS, audio) at once and nothing outlives the connection. Typed
and spoken turns are numbered and reported alike; a reply started early for a
spoken turn (held, unheard) keeps its events until it is the user's turn, and
is never announced if it is thrown away.
"""

from __future__ import annotations

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
from ..pipeline.images import inline_url
from ..pipeline.listening import UserTurn
from ..pipeline.session import Session
from ..pipeline.turn import Turn, TurnResult
from ..pipeline.voice_loop import VoiceTurn, turn_record
from ..sinks.base import SinkError
from ..tts.base import TtsError
from ..vendors.errors import LlmError
from ..vocab.messages import participant_problem
from . import protocol as p
from .admission import DRAINING, Admission, refuse, send_error_now
from .listening_setup import ListeningFailed, listens, voice_input_for
from .outbox import Audio, Close, Outbox
from .rate_limit import RateLimit, Verdict
from .reading import set_send_buffer, watch_reading
from .socket_sink import SocketSink
from .state import ServerState
from .turn_events import log_event
from .voice_input import AudioBudget, BadAudio
from .voice_session import VoiceInput, input_recording

__all__ = ["Connection"]


class Connection:
    def __init__(self, ws: ServerConnection, state: ServerState) -> None:
        self.ws, self.state = ws, state
        self.id = state.session_id()
        self.turn = 0
        self.turn_scope: anyio.CancelScope | None = None
        self.turn_done = anyio.Event()
        self.turn_done.set()
        self.last_activity = anyio.current_time()
        self.dropped = anyio.Event()
        self.limit = RateLimit(state.messages_per_second)
        self.outbox: Outbox | None = None
        self.session: Session | None = None
        self.sink: SocketSink | None = None
        self.voice: VoiceInput | None = None  # the client sends its voice (1.1)
        self.audio_budget = AudioBudget()
        self._audio_told_at = -1.0  # when the client was last told its audio is refused
        self._starting_turn = False  # the next session turn is announced (not a held reply)
        self._held_events: list[str] | None = None  # a held reply's, until it is the user's

    # Setup

    async def run(self) -> None:
        state = self.state
        start = await Admission(self.ws, state, self.id, self.limit).admit()
        if start is None:
            return
        try:
            await self._serve(start)
        finally:
            state.release_slot()

    async def _refuse(self, code: int, reason: str, *events: str) -> None:
        await refuse(self.ws, self.state, self.id, code, reason, *events)

    async def _send_error_now(self, code: p.ErrorCode, message: str) -> None:
        """Before the session's sender runs: send an error directly."""
        await send_error_now(self.ws, self.state, code, message)

    async def _serve(self, start: p.SessionStart) -> None:
        state = self.state
        name = start.pipeline or state.default_pipeline
        config = state.pipelines[name]
        try:
            parts = build_parts(
                config.with_overrides({"sink": {"kind": "null", "realtime": False}}),
                sink_rate=start.audio.sample_rate,
            )
        except ConfigError as exc:  # e.g. a cloud key removed from the environment since
            await self._fail_start("internal", f"pipeline {name}: {exc}")
            return
        frames_per_s = 1000 // p.FRAME_MS
        self.outbox = outbox = Outbox(
            max(1, round(state.max_queued_audio_s * frames_per_s)),
            state.max_queued_events,
            state.max_queued_event_chars,
        )
        self.sink = sink = SocketSink(
            outbox,
            encoding=start.audio.encoding,
            sample_rate=start.audio.sample_rate,
            on_overflow=self._drop_slow_client,
        )
        audio = start.audio
        set_send_buffer(self.ws, audio.encoding, audio.sample_rate, state.send_buffer_s)
        # The toolbox is this session's own MCP connections, closed with it.
        self.session = session = session_for(
            config,
            parts,
            sink=sink,
            log=self._on_log,
            images=inline_url,  # the page shows a generated image from its log event
            on_piece_start=self._on_piece_start,
            on_turn_start=self._session_turn_started,
            conversation_id=self.id,  # on each turn's trace
        )
        async with AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(session)
            except McpServerError as exc:  # a tool server will not start or answer
                await self._fail_start("internal", f"pipeline {name}: {exc}")
                return
            except (LlmError, TtsError, SinkError) as exc:  # a model or voice will not load
                code: p.ErrorCode = "llm_error" if isinstance(exc, LlmError) else "tts_error"
                await self._fail_start(code, str(exc))
                return
            if start.input_audio is not None and listens(config):
                try:
                    self.voice = await voice_input_for(
                        stack, config, start.input_audio, start.turn_taking, session, self
                    )
                    if state.debug_audio_dir is not None:
                        path = state.debug_audio_dir / f"{self.id}.wav"
                        self.voice.record_to(stack.enter_context(input_recording(path, self.voice)))
                except ListeningFailed as exc:
                    await self._fail_start("stt_error", f"pipeline {name}: {exc}")
                    return
            await self._session(start, name, parts.membrane.provider.name, parts.engine.name)

    async def _fail_start(self, code: p.ErrorCode, message: str) -> None:
        self.state.log("session_failed", session=self.id, code=code, message=message)
        await self._send_error_now(code, message)
        await self._refuse(p.CLOSE_INTERNAL, code)

    async def _session(self, start: p.SessionStart, name: str, llm: str, tts: str) -> None:
        state = self.state  # (its slot was taken in ``run``, before the session was built)
        started = time.monotonic()
        state.log("session_start", session=self.id, pipeline=name, audio=start.audio.model_dump())
        try:
            self._put(
                p.event(
                    "session.started",
                    session=self.id,
                    protocol=p.PROTOCOL_VERSION,
                    pipeline=name,
                    pipelines=list(state.pipelines),
                    descriptions={n: c.description for n, c in state.pipelines.items()},
                    llm=llm,
                    tts=tts,
                    audio={**start.audio.model_dump(), "frame_ms": p.FRAME_MS},
                    protocol_version=p.PROTOCOL_MINOR,
                    input_audio=None if self.voice is None else self.voice.declared.model_dump(),
                    turn_taking=None if self.voice is None else start.turn_taking,
                    listening={n: listens(c) for n, c in state.pipelines.items()},
                )
            )
            async with anyio.create_task_group() as tg:
                if self.voice is not None:
                    tg.start_soon(self.voice.run)
                tg.start_soon(self._sender)
                tg.start_soon(self._idle_watchdog)
                tg.start_soon(self._drain_watch)
                tg.start_soon(self._enforce_drop)
                tg.start_soon(self._watch_reading)
                await self._receive(tg)
                tg.cancel_scope.cancel()
        finally:
            if not self.turn_done.is_set():  # a spoken turn, cancelled with the session
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
        while True:
            try:
                data = await self.ws.recv()
            except ConnectionClosed:
                return
            if isinstance(data, bytes):  # the client's voice: not activity by itself
                self._on_audio(data)
                continue
            self.last_activity = anyio.current_time()
            verdict = self.limit.check(self.last_activity)
            if verdict is Verdict.DISCONNECT:
                self._close(p.CLOSE_POLICY, "rate_limited")
                continue
            if verdict is not Verdict.ACCEPT:
                if verdict is Verdict.REFUSE:
                    self._error("rate_limited", "too many messages: at most 20 a second")
                continue
            try:
                message = p.parse_client_message(data)
            except p.BadMessage as exc:
                self._error("bad_message", str(exc))
                continue
            if isinstance(message, p.UserMessage):
                # The assistant's name, a look-alike of it or a role's: refused up front.
                problem = None
                if self.session is not None and message.participant is not None:
                    problem = participant_problem(self.session.options, message.participant)
                if problem is not None:
                    self._error("bad_message", f"participant: {problem}")
                elif not self.turn_done.is_set():
                    self._error("busy", "a turn is running: send interrupt first", self.turn)
                elif self.state.draining.is_set():
                    self._error("draining", DRAINING)
                else:
                    self._begin_turn(message.text, "text")
                    tg.start_soon(self._run_turn, message, self.turn)
            elif isinstance(message, p.Interrupt):
                if self.session is not None and self.session.interrupt():
                    self.state.log("interrupt", session=self.id, turn=self.turn)
            elif isinstance(message, p.InputStart | p.InputEnd):
                self._push_to_talk(message)
            elif isinstance(message, p.SessionEnd):
                self._close(p.CLOSE_NORMAL, "session.end")
            else:
                self._error("bad_message", "the session has started already")

    # Turns, typed or spoken

    def _begin_turn(self, text: str, source: str, held: bool = False) -> None:
        """Number the next turn and count it as running; announce it unless it is
        a held reply (``_commit_held`` announces it once it is the user's)."""
        assert self.sink is not None
        state = self.state
        self.turn += 1
        self.turn_done = anyio.Event()
        self.sink.turn = self.turn
        state.turns_running += 1
        self._starting_turn = not held
        if held:
            self._held_events = []
            return
        self._announce(text, source)

    def _announce(self, text: str, source: str) -> None:
        self.state.metrics.turns.inc()
        self.state.log(
            "turn_start", session=self.id, turn=self.turn, chars=len(text), source=source
        )
        self._put(p.event("turn.started", turn=self.turn, text=text, source=source))

    def _end_turn(self) -> None:
        self._starting_turn = False
        self.turn_scope = None
        self.state.turns_running -= 1
        self.last_activity = anyio.current_time()
        self.turn_done.set()

    async def _run_turn(self, message: p.UserMessage, n: int) -> None:
        assert self.session is not None
        state, session = self.state, self.session
        if self.voice is not None:  # its echo and barge-in, as a spoken turn's
            self.voice.listener.assistant_speaking(True)
        try:
            with anyio.CancelScope() as scope:
                self.turn_scope = scope
                try:
                    result = await session.turn(message.text, message.participant)
                except Exception as exc:  # a bug: the session goes on, the client is told
                    state.log("turn_failed", session=self.id, turn=n, error=repr(exc))
                    self._error("internal", "the turn failed inside the server", n)
                    return
                self._report_turn(n, result, result.report.to_dict())
        finally:
            if self.voice is not None:
                self.voice.listener.assistant_speaking(False)
            self._end_turn()

    async def wait_idle(self) -> None:
        """Before a spoken turn: a typed one still running is interrupted (the
        user spoke over it) and its end awaited."""
        while not self.turn_done.is_set():
            if self.session is not None:
                self.session.interrupt()
            await self.turn_done.wait()

    def _report_turn(self, n: int, result: TurnResult, report_dict: dict[str, Any]) -> None:
        state, report = self.state, result.report
        self._put(p.event("metrics", turn=n, report=report_dict))
        self._put(
            p.event(
                "turn.end",
                turn=n,
                heard=result.spoken_text,
                visible=result.visible_text,
                interrupted=result.interrupted,
                error=result.error,
                terminated=result.terminated,
            )
        )
        if result.error:
            llm_failed = result.reply is None or result.reply.error is not None
            kind = report.llm_error if llm_failed else None  # ("stalled", …)
            self._error("llm_error" if llm_failed else "tts_error", result.error, n, kind)
        first_audio = report.first_audio_ms
        if first_audio is not None:
            state.metrics.first_audio.observe(first_audio / 1000)
        state.log(
            "turn_end",
            session=self.id,
            turn=n,
            first_audio_ms=None if first_audio is None else round(first_audio, 1),
            audio_seconds=round(report.audio_seconds, 3),
            interrupted=result.interrupted,
            error=result.error,
        )

    def _session_turn_started(self, turn: Turn) -> None:
        """Every turn of the session, as it starts: one not announced before is a
        reply held for a tentative end of the user's speech."""
        if self._starting_turn:
            self._starting_turn = False
        else:
            self._begin_turn("", "voice", held=True)

    # What the listening half reports (voice_session.VoiceHooks)

    def event(self, text: str) -> None:
        self._put(text)

    def speech_started(self) -> None:
        self.last_activity = anyio.current_time()

    def voice_turn_started(self, heard: UserTurn) -> None:
        if self._held_events is not None:  # the held reply is the user's: heard from now
            held, self._held_events = self._held_events, None
            self._announce(heard.text, "voice")
            for text in held:
                self._put(text)
            return
        self._begin_turn(heard.text, "voice")

    def voice_turn_ended(self, turn: VoiceTurn) -> None:
        self._report_turn(self.turn, turn.result, turn_record(turn))
        if turn.latency.voice_to_voice_ms is not None:
            self.state.metrics.voice_to_voice.observe(turn.latency.voice_to_voice_ms / 1000)
        self._end_turn()

    def held_reply_discarded(self) -> None:
        if self._held_events is not None:  # never announced: its number is reused
            self._held_events = None
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

    # The client's voice

    def _on_audio(self, data: bytes) -> None:
        voice, now = self.voice, anyio.current_time()
        if voice is None:
            self._refuse_audio(
                now,
                "bad_message",
                "this session takes no audio: start it with input_audio on a pipeline that listens",
            )
            return
        try:
            voice.decoder.check(data)
        except BadAudio as exc:
            self._refuse_audio(now, "bad_message", f"audio frame: {exc}")
            return
        verdict = self.audio_budget.take(voice.decoder.seconds(data), now)
        if verdict is Verdict.ACCEPT:
            voice.feed(data)
        elif verdict is Verdict.DISCONNECT:
            self._close(p.CLOSE_POLICY, "rate_limited")
        elif verdict is Verdict.REFUSE:
            self._error(
                "rate_limited",
                "audio faster than real time: at most 1 s ahead; the audio over it is dropped",
            )

    def _refuse_audio(self, now: float, code: p.ErrorCode, message: str) -> None:
        """Frames come 50 a second: a client that sends bad ones is told once a second."""
        if now - self._audio_told_at >= 1.0:
            self._audio_told_at = now
            self._error(code, message)

    def _push_to_talk(self, message: p.InputStart | p.InputEnd) -> None:
        voice = self.voice
        if voice is None or voice.button is None:
            self._error("bad_message", f"{message.type}: this session does not push to talk")
        elif isinstance(message, p.InputStart):
            if not voice.press():
                self._error("bad_message", "input.start: the input has started already")
            elif not self.turn_done.is_set() and self.session is not None:
                # The user pressed to speak: the reply stops now, not after their words.
                self.barge_in("interrupt", None)
                self.session.interrupt()
        elif not voice.release():
            self._error("bad_message", "input.end without input.start")

    # What the pipeline reports, as events

    def _on_piece_start(self, text: str) -> None:
        self._put_turn_event(p.event("transcript.delta", turn=self.turn, text=text))

    def _on_log(self, record: dict[str, Any]) -> None:
        event = log_event(self.turn, record)
        if event is not None:
            self._put_turn_event(event)

    def _put_turn_event(self, text: str) -> None:
        if self._held_events is not None:
            self._held_events.append(text)  # (bounded by the outbox once released)
        else:
            self._put(text)

    # Sending

    def _put(self, item: str | Audio | Close) -> None:
        assert self.outbox is not None
        if not self.outbox.put(item):
            self._drop_slow_client()

    def _error(
        self, code: p.ErrorCode, message: str, turn: int | None = None, kind: str | None = None
    ) -> None:
        self.state.metrics.errors.labels(code).inc()
        self.state.log("error", session=self.id, code=code, message=message, turn=turn)
        self._put(p.error_event(code, message, turn, kind))

    def _close(self, code: int, reason: str, *events: str, discard: bool = False) -> None:
        assert self.outbox is not None
        self._cancel_turn()
        self.outbox.close(code, reason, *events, discard=discard)

    def _cancel_turn(self) -> None:
        if self.turn_scope is not None:
            self.turn_scope.cancel()

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

    def _drop_slow_client(self) -> None:
        if self.dropped.is_set():
            return
        self.dropped.set()
        self.state.metrics.dropped.inc()
        self.state.metrics.errors.labels("slow_client").inc()
        self.state.log("dropped", session=self.id, turn=self.turn, reason="slow_client")
        message = "the client did not take its audio in time"
        self._close(
            p.CLOSE_POLICY, "slow_client", p.error_event("slow_client", message), discard=True
        )

    async def _enforce_drop(self) -> None:
        """A dropped client that never reads again cannot be sent its close frame:
        after the close timeout the connection is cut."""
        await self.dropped.wait()
        await anyio.sleep(self.state.close_timeout_s)
        self.ws.transport.abort()

    # Watchdogs

    async def _watch_reading(self) -> None:
        assert self.sink is not None
        await watch_reading(
            self.ws,
            self.sink,
            bound_s=self.state.max_queued_audio_s,
            turn_running=lambda: not self.turn_done.is_set(),
            on_stalled=self._drop_slow_client,
        )

    async def _idle_watchdog(self) -> None:
        timeout = self.state.idle_timeout_s
        while True:
            await self.turn_done.wait()
            remaining = self.last_activity + timeout - anyio.current_time()
            if remaining <= 0 and self.turn_done.is_set():
                self.state.metrics.errors.labels("idle_timeout").inc()
                self.state.log("idle_timeout", session=self.id)
                message = f"no message for {timeout:g} s"
                self._close(p.CLOSE_IDLE, "idle_timeout", p.error_event("idle_timeout", message))
                return
            await anyio.sleep(max(remaining, 0.01))

    async def _drain_watch(self) -> None:
        """On drain: let the running turn finish (up to the deadline), then close 1001."""
        state = self.state
        await state.draining.wait()
        with anyio.move_on_after(state.drain_deadline - anyio.current_time()):
            await self.turn_done.wait()
        if not self.turn_done.is_set() and self.session is not None:
            # Cut as an interruption, so the client still gets the turn's end and
            # what was heard of it.
            self.session.interrupt()
            with anyio.move_on_after(state.close_timeout_s):
                await self.turn_done.wait()
        self._close(p.CLOSE_GOING_AWAY, "server shutting down")

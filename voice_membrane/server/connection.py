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

import functools
from contextlib import AsyncExitStack

import anyio
from anyio.abc import TaskGroup
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ..membrane.tools_mcp import McpServerError
from ..pipeline.build import build_parts, session_for
from ..pipeline.config import ConfigError
from ..pipeline.images import inline_url
from ..pipeline.turn import TurnResult
from ..sinks.base import SinkError
from ..tts.base import TtsError
from ..vendors.errors import LlmError
from ..vocab.messages import participant_problem
from . import protocol as p
from .admission import DRAINING, Admission, refuse, send_error_now
from .listening_setup import ListeningFailed, listens
from .outbox import Barrier, Outbox
from .rate_limit import RateLimit, Verdict
from .reading import set_send_buffer, watch_reading
from .resume import TURN_END_WAIT_S, Keeper, restore_history, stored_history
from .served_session import ServedSession
from .session_store import Fate, LastTurn, SessionRecord, StoreUnavailable
from .socket_sink import SocketSink
from .state import ServerState

__all__ = ["Connection"]


class Connection(ServedSession):
    """A protocol client's session (``/v1/session``): the JSON messages, typed
    turns, push to talk, and the socket sink's audio frames."""

    def __init__(self, ws: ServerConnection, state: ServerState) -> None:
        super().__init__(ws, state)
        self.limit = RateLimit(state.messages_per_second)
        self.sink: SocketSink | None = None
        # its place in the session store (resume.py)
        self.keeper = Keeper(state.store, state.live, state.log)
        self._start: p.SessionStart | None = None
        self._running: tuple[int, str] | None = None  # the turn running, and its text
        self._last_turn: LastTurn | None = None
        self._ended = False  # session.end: nothing is kept of it

    def _set_sink_turn(self, n: int) -> None:
        assert self.sink is not None
        self.sink.turn = n

    def _audio_sent_s(self) -> float:
        return 0.0 if self.sink is None else self.sink.played_seconds

    # Setup

    async def run(self) -> None:
        state = self.state
        start = await Admission(self.ws, state, self.id, self.limit).admit()
        if start is None:
            return
        try:
            if isinstance(start, p.SessionResume):
                await self._resume(start)
            else:
                await self._serve(start)
        finally:
            state.release_slot()

    async def _resume(self, message: p.SessionResume) -> None:
        """The stored session, claimed with its token (spent: a new one is issued),
        served as it was started; refused with 4410 whatever the reason, so a
        prober learns nothing of which sessions exist. While the store cannot be
        reached: 1013, try again (nothing is spent)."""
        try:
            claimed = await self.keeper.claim(message.session, message.resume_token)
        except StoreUnavailable:
            await self._send_error_now("store_unavailable", STORE_UNAVAILABLE)
            await self._refuse(p.CLOSE_TRY_AGAIN, "store_unavailable")
            return
        if claimed is not None and claimed[0].pipeline not in self.state.pipelines:
            await self.keeper.give_back(claimed[0], message.resume_token)
            claimed = None
        if claimed is None:
            self.state.metrics.errors.labels("resume_failed").inc()
            await self._send_error_now("resume_failed", RESUME_FAILED)
            await self._refuse(p.CLOSE_RESUME_FAILED, "resume_failed")
            return
        record, token = claimed
        self.id = record.session
        start = p.SessionStart(
            type="session.start",
            pipeline=record.pipeline,
            audio=record.audio,
            input_audio=record.input_audio,
            turn_taking=record.turn_taking,
        )
        await self._serve(start, (record, token))

    async def _refuse(self, code: int, reason: str, *events: str) -> None:
        await refuse(self.ws, self.state, self.id, code, reason, *events)

    async def _send_error_now(self, code: p.ErrorCode, message: str) -> None:
        """Before the session's sender runs: send an error directly."""
        await send_error_now(self.ws, self.state, code, message)

    async def _serve(
        self, start: p.SessionStart, resumed: tuple[SessionRecord, str] | None = None
    ) -> None:
        state = self.state
        name = start.pipeline or state.default_pipeline
        self._start = start
        config = state.pipelines[name]
        try:
            parts = build_parts(
                config.with_overrides({"sink": {"kind": "null", "realtime": False}}),
                sink_rate=start.audio.sample_rate,
            )
        except ConfigError as exc:  # e.g. a cloud key removed from the environment since
            await self._fail_start("internal", f"pipeline {name}: {exc}")
            return
        frames_per_s = 1000 // start.audio.frame_ms
        self.outbox = outbox = Outbox(
            max(1, round(state.max_queued_audio_s * frames_per_s)),
            state.max_queued_events,
            state.max_queued_event_chars,
        )
        self.sink = sink = self._make_sink(outbox, start)
        audio = start.audio
        set_send_buffer(self.ws, audio, state.send_buffer_s)
        # The toolbox is this session's own MCP connections, closed with it.
        self.session = session = session_for(
            config,
            parts,
            sink=self._recorded(sink, config, pipeline=name, transport="websocket"),
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
                    await self._listen(stack, config, start.input_audio, start.turn_taking, session)
                except ListeningFailed as exc:
                    await self._fail_start("stt_error", f"pipeline {name}: {exc}")
                    return
            await self._session(
                start, name, parts.membrane.provider.name, parts.engine.name, resumed
            )

    def _make_sink(self, outbox: Outbox, start: p.SessionStart) -> SocketSink:
        """The session's audio out (a WebRTC session's goes to its track)."""
        return SocketSink(
            outbox,
            encoding=start.audio.encoding,
            sample_rate=start.audio.sample_rate,
            frame_ms=start.audio.frame_ms,
            on_overflow=self._drop_slow_client,
        )

    async def _fail_start(self, code: p.ErrorCode, message: str) -> None:
        self.state.log("session_failed", session=self.id, code=code, message=message)
        await self._send_error_now(code, message)
        await self._refuse(p.CLOSE_INTERNAL, code)

    async def _session(
        self,
        start: p.SessionStart,
        name: str,
        llm: str,
        tts: str,
        resumed: tuple[SessionRecord, str] | None,
    ) -> None:
        state = self.state  # (its slot was taken in ``run``, before the session was built)
        assert self.session is not None
        if resumed is None:
            token, kind, extra = self.keeper.issue(self.id), "session.started", {}
            state.log(
                "session_start", session=self.id, pipeline=name, audio=start.audio.model_dump()
            )
        else:
            record, token = resumed
            restore_history(self.session, record)
            self.turn = record.turn
            self._last_turn = record.resumed_last_turn()
            last = None if self._last_turn is None else self._last_turn.model_dump()
            kind, extra = "session.resumed", {"turns": self.session.turns, "last_turn": last}
            state.log(
                "session_resume",
                session=self.id,
                pipeline=name,
                turns=self.session.turns,
                last_turn=None if last is None else {"turn": last["turn"], "fate": last["fate"]},
            )
        self._keep()
        self._put(
            p.event(
                kind,
                session=self.id,
                resume_token=token,
                resume_grace_s=state.store.grace_s,
                protocol=p.PROTOCOL_VERSION,
                pipeline=name,
                pipelines=list(state.pipelines),
                descriptions={n: c.description for n, c in state.pipelines.items()},
                llm=llm,
                tts=tts,
                audio=start.audio.model_dump(),
                protocol_version=p.PROTOCOL_MINOR,
                input_audio=None if self.voice is None else self.voice.declared.model_dump(),
                turn_taking=None if self.voice is None else start.turn_taking,
                listening={n: listens(c) for n, c in state.pipelines.items()},
                **extra,
            )
        )
        try:
            await self._hold(
                self._receive, self._watch_reading, self.keeper.run, self._watch_superseded
            )
        finally:
            await self.keeper.finish(self._record(), keep=not self._ended)

    # What is kept for a resume (resume.py)

    def _record(self) -> SessionRecord:
        assert self.session is not None and self._start is not None
        start, running = self._start, self._running
        return SessionRecord(
            session=self.id,
            pipeline=start.pipeline or self.state.default_pipeline,
            audio=start.audio,
            input_audio=start.input_audio,
            turn_taking=start.turn_taking,
            turn=self.turn,
            first_kept=self.session.first_kept,
            history=stored_history(self.session),
            running=None if running is None else running[0],
            running_text="" if running is None else running[1],
            last_turn=self._last_turn,
        )

    def _keep(self) -> anyio.Event | None:
        """The record as it is now, to the keeper: the event it sets once written."""
        if self.session is None or self._start is None:
            return None
        return self.keeper.put(self._record())

    def _turn_announced(self, text: str) -> None:
        self._running = (self.turn, text)
        self._keep()  # a turn lost with this process is reported as cancelled

    def _turn_reported(self, n: int, result: TurnResult) -> None:
        if result.error is not None:
            fate: Fate = "error"
        else:
            fate = "interrupted" if result.interrupted else "complete"
        text = self._running[1] if self._running is not None and self._running[0] == n else ""
        self._last_turn = LastTurn(
            turn=n, fate=fate, text=text, heard=result.spoken_text, error=result.error
        )
        if self._running is not None and self._running[0] == n:
            self._running = None  # (ended: the record says so before the client is told)
        # turn.end (queued next) waits for this record: a client told the turn
        # ended, resuming elsewhere at once, finds it stored.
        if (written := self._keep()) is not None:
            self._put(Barrier(written, TURN_END_WAIT_S))

    def _turn_over(self) -> None:
        running, self._running = self._running, None
        if running is None:
            return  # (a reported turn was kept as it was reported; a held reply never ran)
        if self._last_turn is None or self._last_turn.turn != running[0]:
            # Ended without a result (cancelled, or failed inside the server): it is
            # not in the history.
            self._last_turn = LastTurn(turn=running[0], fate="cancelled", text=running[1])
        self._keep()

    async def _watch_superseded(self) -> None:
        """A newer connection resumed this session: what was heard of a running
        turn is kept and handed over, and this connection closes with 4409."""
        await self.keeper.superseded.wait()
        await self._settle_turn()
        self.keeper.hand_over(self._record())
        self.state.log("superseded", session=self.id)
        self.close(
            p.CLOSE_SUPERSEDED,
            "superseded",
            p.error_event("superseded", "this session was resumed on another connection"),
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
            if self._over_limit(self.last_activity):
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
                    assert self.session is not None  # (made before the loop runs)
                    self._begin_turn(message.text, "text")
                    turn = functools.partial(self.session.turn, message.text, message.participant)
                    tg.start_soon(self._run_turn, self.turn, turn)
            elif isinstance(message, p.Interrupt):
                if self.session is not None and self.session.interrupt():
                    self.state.log("interrupt", session=self.id, turn=self.turn)
            elif isinstance(message, p.InputStart | p.InputEnd):
                self._push_to_talk(message)
            elif isinstance(message, p.SessionEnd):
                self._ended = True
                self.close(p.CLOSE_NORMAL, "session.end")
            else:
                self._error("bad_message", "the session has started already")

    def _over_limit(self, now: float) -> bool:
        """One more message in the limit: True when it is dropped (a flood: the
        client is told once; closed with 1008 if it goes on)."""
        verdict = self.limit.check(now)
        if verdict is Verdict.DISCONNECT:
            self.close(p.CLOSE_POLICY, "rate_limited")
        elif verdict is Verdict.REFUSE:
            self._error(
                "rate_limited", f"too many messages: at most {self.limit.per_second} a second"
            )
        return verdict is not Verdict.ACCEPT

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
        self._take_audio(voice, data)

    def _refuse_audio(self, now: float, code: p.ErrorCode, message: str) -> None:
        """A frame that is not audio, or audio nobody hears, costs what a message
        does: a flood of them is closed like one (valid audio has its own budget)."""
        if not self._over_limit(now):
            super()._refuse_audio(now, code, message)

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

    # Watchdogs

    async def _watch_reading(self) -> None:
        assert self.sink is not None
        await watch_reading(
            self.ws,
            self.sink,
            bound_s=self.state.max_queued_audio_s,
            turn_running=lambda: not self.turn_done.is_set(),
        )


STORE_UNAVAILABLE = "the session store cannot be reached just now: try again in a few seconds"
RESUME_FAILED = (
    "this session cannot be resumed (unknown, expired, or the resume token is spent "
    "or wrong): start a new one"
)

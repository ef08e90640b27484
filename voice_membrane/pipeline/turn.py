"""A turn: one reply, from the LLM request to the last audio, as one task group.

``Turn.interrupt()`` cancels the group — LLM, parser, chunker, TTS and sink stop
together — and silences the sink at once, without waiting for the group to wind
down (a TTS engine or LLM step running in a thread finishes its step first); no
task outlives ``run()``. The text actually heard before the interruption is
worked out from the sink's playback position, so the conversation history holds
what the user heard.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio

from ..chunking import SpeechChunker
from ..infra.exception_groups import leaves
from ..membrane.membrane import Membrane
from ..membrane.reply import ReplyResult, Retrying
from ..membrane.tools import OnToolCalls
from ..sinks.base import AudioSink, SinkError
from ..telemetry.spans import mark_error, stage_span
from ..tts.base import TtsEngine, TtsError
from ..vendors.errors import LlmError
from ..vocab.events import Block
from ..vocab.messages import Request
from .audio_stages import SinkStage, SpokenPiece, TtsStage
from .event_log import EventLogger
from .images import ImageSaver
from .metrics import ContextFit, LatencyReport, TurnMetrics
from .reply_stages import ChunkStage, ReplyStage, RouteStage
from .scheduling import AHEAD_S, FirstAudioPriority
from .stream_items import Piece, PieceAudio, Timed, Visible
from .tracing import add_stamps, report_attributes, traced_stage

# Stream sizes: enough for the LLM to run well ahead of speech, small enough that
# an interruption never has much queued work to throw away.
EVENT_BUFFER = 256
PIECE_BUFFER = 32
AUDIO_BUFFER = 8


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What a turn produced.

    ``blocks`` are every completed block of the reply (hidden ones included);
    ``spoken_text`` is what was heard — all of the visible text unless the turn
    was interrupted; ``error`` says why the turn ended early, if it did (what was
    produced before is kept); ``reply`` is the membrane's result (usage, stop
    reason, the messages to add to the conversation), None if the turn was
    interrupted before the reply ended.
    """

    blocks: tuple[Block, ...]
    visible_text: str
    spoken_text: str
    interrupted: bool
    error: str | None
    report: LatencyReport
    reply: ReplyResult | None = None
    # The request was refused before it was sent (a look-alike name, an unreadable
    # blob): the conversation does not keep the turn.
    request_refused: bool = False

    @property
    def terminated(self) -> str | None:
        """Why a stream policy ended the reply, if one did (what passed was spoken)."""
        return self.reply.terminated if self.reply is not None else None


class Turn:
    def __init__(
        self,
        *,
        membrane: Membrane,
        engine: TtsEngine,
        sink: AudioSink,
        request: Request,
        chunker: SpeechChunker,
        on_tool_calls: OnToolCalls | None = None,
        log: EventLogger,
        on_piece_start: Callable[[str], None] = lambda text: None,
        on_retry: Callable[[Retrying], None] = lambda retrying: None,
        context: ContextFit | None = None,
        images: ImageSaver | None = None,
        trace_attributes: Mapping[str, str | int] | None = None,
        first_audio_priority: bool = False,
        priority_ahead_s: float = AHEAD_S,
    ) -> None:
        self.membrane, self.engine, self.sink = membrane, engine, sink
        self.request = request
        self.on_tool_calls = on_tool_calls
        self._reply: ReplyStage | None = None
        self.chunker = chunker
        self.log = log
        self.on_piece_start = on_piece_start
        self.on_retry = on_retry
        self.images = images  # where generated images go (never to speech)
        self.trace_attributes = dict(trace_attributes or {})  # the session's, on the span
        self.metrics = TurnMetrics(context=context)
        # The LLM waits while the engine makes a piece's first audio (scheduling.py).
        self.priority = FirstAudioPriority(first_audio_priority, ahead_s=priority_ahead_s)
        self._scope: anyio.CancelScope | None = None
        self._interrupted = False
        self._interrupt_seen: anyio.Event | None = None  # created by run, in its event loop

    def interrupt(self) -> None:
        """Stop the turn now: cancels every stage and silences the sink."""
        self._interrupted = True
        if self._scope is not None:
            self._scope.cancel()
        if self._interrupt_seen is not None:
            self._interrupt_seen.set()

    def _llm_label(self) -> str:
        """``vendor:model`` for a cloud provider; an embedded source's name already
        says which model it runs (``local:SmolLM2-…``)."""
        name = self.membrane.provider.name
        return name if ":" in name else f"{name}:{self.request.config.model}"

    async def run(self) -> TurnResult:
        """The turn, as one trace (``voice.turn``: docs/telemetry.md)."""
        attributes: dict[str, str | int] = {
            **self.trace_attributes,
            "voice.llm": self._llm_label(),
            "voice.tts": self.engine.name,
            "voice.sink": self.sink.name,
        }
        with stage_span("voice.turn", attributes) as span:
            result = await self._run()
            if span.is_recording():  # (with no SDK, not even the attributes are built)
                add_stamps(span, self.metrics)
                span.set_attributes(report_attributes(result.report))
            if result.error is not None:
                mark_error(span, "turn")
            return result

    async def _run(self) -> TurnResult:
        m = self.metrics
        played_base = self.sink.played_seconds
        route = RouteStage(self.log, m, self.images)
        sink_stage = SinkStage(self.sink, m, self.on_piece_start, self.priority)
        error: str | None = None
        self._interrupt_seen = interrupt_seen = anyio.Event()
        async with anyio.create_task_group() as watch:
            # Outside the stages' scope, so that an interruption does not cancel it.
            watch.start_soon(self._silence_on_interrupt, interrupt_seen)
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._interrupted:
                    scope.cancel()
                    interrupt_seen.set()
                try:
                    errors = await self._run_stages(route, sink_stage)
                except* (LlmError, TtsError, SinkError) as group:
                    errors = [str(e) for e in leaves(group)]
                error = "; ".join(errors) or None
            watch.cancel_scope.cancel()  # the stages are over: no silencing now
        if self._interrupted or error is not None:
            m.interrupted = self._interrupted
            # (Again) now that every stage has ended: a write that was still under
            # way when the sink was first silenced leaves nothing playing.
            with anyio.CancelScope(shield=True):
                await self.sink.stop()
        sink_stage.note_first_audio()
        if self.priority.enabled:
            m.llm_held_ns = self.priority.held_ns
        m.stamp("turn_end")
        played = self.sink.played_seconds - played_base
        spoken = _spoken_text(
            sink_stage.pieces,
            sink_stage.char_ends,
            sink_stage.written_s,
            played,
            complete=not (self._interrupted or error),
        )
        m.chars_spoken = len(spoken.strip())
        report = m.report(llm=self._llm_label(), tts=self.engine.name, sink=self.sink.name)
        return TurnResult(
            blocks=tuple(route.blocks),
            visible_text="".join(route.visible),
            spoken_text=spoken.strip(),
            interrupted=self._interrupted,
            error=error,
            report=report,
            reply=self._reply.result if self._reply is not None else None,
            request_refused=self._reply is not None and self._reply.refused,
        )

    async def _silence_on_interrupt(self, interrupt_seen: anyio.Event) -> None:
        """Stop the sink as soon as the turn is interrupted, not after the stages
        have wound down: cancelling them is asynchronous, and a stage inside a
        thread or a slow sink would otherwise keep the audio playing meanwhile."""
        await interrupt_seen.wait()
        with anyio.CancelScope(shield=True):
            await self.sink.stop()

    async def _run_stages(self, route: RouteStage, sink_stage: SinkStage) -> list[str]:
        """Run the stages; the errors that ended the reply or the speech early (the
        stages keep what came before). A sink error is raised."""
        m = self.metrics
        events_in, events_out = anyio.create_memory_object_stream[Timed](EVENT_BUFFER)
        visible_in, visible_out = anyio.create_memory_object_stream[Visible](EVENT_BUFFER)
        pieces_in, pieces_out = anyio.create_memory_object_stream[Piece](PIECE_BUFFER)
        audio_in, audio_out = anyio.create_memory_object_stream[PieceAudio](AUDIO_BUFFER)
        reply = self._reply = ReplyStage(
            self.membrane, self.request, m, self.on_tool_calls, self.on_retry, self.priority
        )
        tts = TtsStage(self.engine, self.log, m, self.priority)
        chunk = ChunkStage(self.chunker, m, self.priority)
        timers = m.stages
        # Each stage a span, a child of the turn's (the tasks inherit its context).
        async with anyio.create_task_group() as tg:
            tg.start_soon(traced_stage, "voice.reply", timers["parse"], reply.run, events_in)
            tg.start_soon(
                traced_stage, "voice.route", timers["route"], route.run, events_out, visible_in
            )
            tg.start_soon(
                traced_stage, "voice.chunk", timers["chunk"], chunk.run, visible_out, pieces_in
            )
            tg.start_soon(traced_stage, "voice.tts", timers["tts"], tts.run, pieces_out, audio_in)
            tg.start_soon(traced_stage, "voice.sink", timers["sink"], sink_stage.run, audio_out)
        return [error for error in (reply.error, tts.error) if error is not None]


def _spoken_text(
    pieces: list[SpokenPiece],
    char_ends: list[tuple[str, float]],
    written_s: float,
    played_s: float,
    *,
    complete: bool,
) -> str:
    """The text heard. When every piece came with character timings, the words
    whose last character had been played; else whole pieces whose audio was
    played, and of the piece playing when the turn stopped, the share of its
    words matching the share of its audio."""
    if complete:
        return "".join(p.text for p in pieces)
    if pieces and char_ends and all(p.aligned for p in pieces):
        return _heard_by_alignment(char_ends, played_s)
    heard: list[str] = []
    for piece in pieces:
        end = written_s if piece.end_s is None else piece.end_s
        if end <= played_s + 1e-3:
            heard.append(piece.text)
            continue
        if piece.start_s < played_s and end > piece.start_s:
            share = (played_s - piece.start_s) / (end - piece.start_s)
            words = piece.text.split()
            lead = piece.text[: len(piece.text) - len(piece.text.lstrip())]
            heard.append(lead + " ".join(words[: int(len(words) * share)]))
        break
    return "".join(heard)


def _heard_by_alignment(char_ends: list[tuple[str, float]], played_s: float) -> str:
    """The characters played to their end, less a word cut off midway."""
    n = 0
    while n < len(char_ends) and char_ends[n][1] <= played_s + 1e-3:
        n += 1
    heard = "".join(char for char, _ in char_ends[:n])
    if n < len(char_ends) and not char_ends[n][0].isspace():
        heard = _PARTIAL_WORD.sub("", heard)
    return heard


_PARTIAL_WORD = re.compile(r"\S+$")

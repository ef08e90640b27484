"""The stages of a turn, each a small class with one job, joined by bounded anyio
memory streams::

    ReplyStage ─events→ RouteStage ─visible→ ChunkStage ─pieces→ TtsStage ─audio→ SinkStage

A stage's ``run`` reads its input stream until it closes, then closes its
output, so the end of the reply flows down the graph. Backpressure comes from
the bounded streams: a slow sink blocks TTS, which stops taking pieces; the
buffers in between let a fast LLM run ahead by their size, no more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import aclosing
from dataclasses import asdict, dataclass, replace
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.lowlevel import checkpoint_if_cancelled
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from ..chunking import SpeechChunk, SpeechChunker
from ..infra.exception_groups import leaves
from ..membrane.membrane import Membrane
from ..membrane.reply import ReplyError, ReplyResult, Retrying, UsageUpdate
from ..membrane.tools import OnToolCalls
from ..sinks.base import AudioSink
from ..telemetry.spans import epoch_ns, tracer
from ..tts.base import Alignment, TtsEngine, TtsError, TtsStream
from ..vocab.audio import AudioChunk, resample
from ..vocab.events import Block, BlockComplete, BlockStart, Chunk, Event
from ..vocab.messages import Request, RequestError
from ..vocab.provider_output import NativeDelta, ProviderOutput, TextDelta, Usage
from .images import ImageSaver, image_summary, save_image
from .metrics import PieceMetrics, TurnMetrics
from .partial_word import ends_mid_word, without_partial_word
from .scheduling import FirstAudioPriority

EventLogger = Callable[[dict[str, Any]], None]
"""Receives one log record (``{"event": …, …}``) per parser event and TTS input."""


@dataclass(frozen=True, slots=True)
class Timed:
    """A reply event, stamped with the arrival of the provider output that produced it.

    ``unfinished``: on a text block's ``BlockComplete``, the reply failed right
    after it, so its last word may be cut off and is not spoken.
    """

    event: Event
    t_ns: int
    unfinished: bool = False


@dataclass(frozen=True, slots=True)
class Visible:
    """Visible text for the chunker, or (``text=None``) the end of a visible block
    (``unfinished``: cut off by an error, see ``Timed``)."""

    text: str | None
    t_ns: int
    unfinished: bool = False


@dataclass(frozen=True, slots=True)
class Piece:
    """A speakable piece; ``t_token_ns`` is when the delta that released it arrived."""

    chunk: SpeechChunk
    t_token_ns: int


@dataclass(frozen=True, slots=True)
class PieceAudio:
    """Audio of the turn's piece number ``index`` (pieces come in text order);
    ``text`` is the piece as the chunker released it."""

    index: int
    text: str
    audio: AudioChunk
    alignment: Alignment | None


def event_record(event: Event) -> dict[str, Any]:
    """A parser event as a JSON-ready log record (a generated image's data left
    out: its ``image`` record says where it went)."""
    if isinstance(event, Chunk):
        return {"event": "chunk", "text": event.text, "meta": asdict(event.meta)}
    if isinstance(event, BlockStart):
        record = {"event": "block_start", "index": event.index, "type": event.type}
        if event.type == "image":
            record["prompt"] = event.prompt
        return record
    block = event.block
    if block.type == "image":
        fields = {name: getattr(block, name) for name in block.__slots__ if name != "image"}
        fields["image"] = image_summary(block.image)
        return {"event": "block_complete", "index": event.index, "block": fields}
    return {"event": "block_complete", "index": event.index, "block": asdict(block)}


class ReplyStage:
    """Streams the reply through a ``Membrane`` (provider call, parsing, tool loop)
    and sends its events on, each stamped with the arrival of the provider output
    that produced it. A provider error ends the reply there; what came before
    still flows on and is spoken, and the turn reports the error. ``on_retry``
    hears of each retry when it is decided (before its wait). With a
    ``priority``, the next item is asked for only when it lets the LLM go on
    (``scheduling.py``)."""

    def __init__(
        self,
        membrane: Membrane,
        request: Request,
        m: TurnMetrics,
        on_tool_calls: OnToolCalls | None = None,
        on_retry: Callable[[Retrying], None] = lambda retrying: None,
        priority: FirstAudioPriority | None = None,
    ) -> None:
        self.membrane, self.request, self.m = membrane, request, m
        self.on_tool_calls, self.on_retry = on_tool_calls, on_retry
        self.priority = priority if priority is not None else FirstAudioPriority(False)
        self.error: str | None = None
        self.result: ReplyResult | None = None
        self._last_ns = 0

    def _on_output(self, output: ProviderOutput) -> None:
        if not isinstance(output, TextDelta | NativeDelta):
            return  # block boundaries, usage and the stop are not tokens
        now = time.perf_counter_ns()
        self.m.stamp("first_token", now)
        self.m.tokens += 1
        self.m.token_ns.append(now)
        self._last_ns = now

    async def run(self, out: ObjectSendStream[Timed]) -> None:
        parse_before = self.membrane.parse_ns
        timer = self.m.stages["parse"]
        async with out:
            self.m.stamp("request_sent")
            self._last_ns = time.perf_counter_ns()
            stream = self.membrane.stream(
                self.request, on_output=self._on_output, on_tool_calls=self.on_tool_calls
            )
            # A text block that ends inside a word waits for the next item: only
            # then is it known whether the reply failed there (a cut-off word) or
            # went on (a finished one). Otherwise nothing is held.
            held: Timed | None = None
            try:
                async with aclosing(stream) as items:
                    while True:
                        # Held, no next item is asked for: the LLM computes nothing.
                        await self.priority.llm_may_go_on()
                        try:
                            item = await anext(items)
                        except StopAsyncIteration:
                            break
                        if held is not None:
                            await out.send(replace(held, unfinished=isinstance(item, ReplyError)))
                            held = None
                        if isinstance(item, Chunk | BlockStart | BlockComplete):
                            timer.items += 1
                            timed = Timed(item, self._last_ns)
                            if _ends_mid_word(item):
                                held = timed
                            else:
                                await out.send(timed)
                        elif isinstance(item, UsageUpdate):  # its total is the reply's so far
                            self.m.usage = _nonzero(item.total)
                        elif isinstance(item, Retrying):
                            self.m.retries.append(f"{item.error} (waited {item.delay_s:.2f} s)")
                            self.on_retry(item)  # as it happens, not only in the report
                        elif isinstance(item, ReplyError):
                            self.error = item.message
                        elif isinstance(item, ReplyResult):
                            self.result = item
                            self.m.stop_reason = str(item.stop_reason)
                if held is not None:
                    await out.send(held)
            except RequestError as exc:
                # A request that cannot be sent (a blob that cannot be read, say) was
                # refused before any network call: the turn ends with its one line.
                self.error = f"request not sent: {exc}"
            finally:
                timer.busy_ns += self.membrane.parse_ns - parse_before


def _ends_mid_word(event: Event) -> bool:
    """A text block completed with its last word possibly unfinished."""
    if not isinstance(event, BlockComplete) or event.block.type != "text":
        return False
    return ends_mid_word(event.block.content or "")


def _nonzero(usage: Usage) -> dict[str, int]:
    return {name: n for name, n in asdict(usage).items() if n}


class RouteStage:
    """Visible text goes on toward speech; every event goes to the log. A
    generated image goes to ``images`` and its ``image`` record to the log."""

    def __init__(self, log: EventLogger, m: TurnMetrics, images: ImageSaver | None = None) -> None:
        self.log, self.m, self.images = log, m, images
        self.blocks: list[Block] = []  # every completed block, for the conversation history
        self.visible: list[str] = []
        self._visible_block: int | None = None  # the block of the last visible chunk

    async def run(self, inp: ObjectReceiveStream[Timed], out: ObjectSendStream[Visible]) -> None:
        timer = self.m.stages["route"]
        async with inp, out:
            async for timed in inp:
                started = time.perf_counter_ns()
                event = timed.event
                self.log(event_record(event))
                visible: Visible | None = None
                if isinstance(event, Chunk) and event.meta.visible:
                    self.m.stamp("first_visible")
                    self.m.visible_chars += len(event.text)
                    self._add_visible(event)
                    visible = Visible(event.text, timed.t_ns)
                elif isinstance(event, BlockComplete):
                    self.blocks.append(event.block)
                    if event.block.type == "text":
                        visible = Visible(None, timed.t_ns, timed.unfinished)
                    elif event.block.image is not None:
                        self.log(await save_image(self.images, event.index, event.block.image))
                timer.add(started)
                if visible is not None:
                    await out.send(visible)

    def _add_visible(self, chunk: Chunk) -> None:
        text = chunk.text
        if (
            chunk.meta.block_index != self._visible_block
            and self.visible
            and not self.visible[-1][-1:].isspace()
            and not text[:1].isspace()
        ):
            # Two text blocks (a hidden one between them): each is spoken as its own
            # piece, so the transcript keeps their words apart too, as the spoken text does.
            self.visible.append(" ")
        self._visible_block = chunk.meta.block_index
        self.visible.append(text)


class ChunkStage:
    """Cuts visible text into pieces; a visible block's end flushes the chunker, so
    text before a tool call is spoken before the call runs."""

    def __init__(self, chunker: SpeechChunker, m: TurnMetrics) -> None:
        self.chunker, self.m = chunker, m

    async def run(self, inp: ObjectReceiveStream[Visible], out: ObjectSendStream[Piece]) -> None:
        timer = self.m.stages["chunk"]
        last_ns = 0
        async with inp, out:
            async for item in inp:
                started = time.perf_counter_ns()
                last_ns = item.t_ns
                if item.text is not None:
                    chunks = self.chunker.feed(item.text)
                elif item.unfinished:
                    chunks = _without_partial_word(self.chunker.flush())
                else:
                    chunks = self.chunker.flush()
                timer.add(started)
                for chunk in chunks:
                    await out.send(self._piece(chunk, item.t_ns))
            for chunk in self.chunker.flush():
                await out.send(self._piece(chunk, last_ns))

    def _piece(self, chunk: SpeechChunk, t_token_ns: int) -> Piece:
        if self.m.chunks == 0:
            self.m.stamp("first_chunk")
            self.m.first_chunk_token_ns = t_token_ns
        self.m.chunks += 1
        return Piece(chunk, t_token_ns)


def _without_partial_word(chunks: list[SpeechChunk]) -> list[SpeechChunk]:
    """The pieces a flush released, minus the cut-off word at their end (only
    ``flush`` releases text that may end inside a word)."""
    if not chunks:
        return chunks
    text = without_partial_word(chunks[-1].text)
    last = [replace(chunks[-1], text=text)] if text.strip() else []
    return chunks[:-1] + last


class TtsStage:
    """Speaks the pieces through one ``TtsStream`` for the turn: one task pushes
    the pieces as they come, this one passes the audio on in text order.

    A TTS error ends the speech but not the reply: the pieces still coming are
    read and dropped, so the reply's text is whole in the transcript, and the
    turn reports the error (``error``). It tells ``priority`` of each piece
    handed over and each audio chunk back (``scheduling.py``)."""

    def __init__(
        self,
        engine: TtsEngine,
        log: EventLogger,
        m: TurnMetrics,
        priority: FirstAudioPriority | None = None,
    ) -> None:
        self.engine, self.log, self.m = engine, log, m
        self.priority = priority if priority is not None else FirstAudioPriority(False)
        self.error: str | None = None
        self._texts: list[str] = []
        # Each piece's span (a TTS request), from its push until the audio of a
        # later piece begins or the stream ends: by piece index, open ones only.
        self._spans: dict[int, Span] = {}

    async def run(self, inp: ObjectReceiveStream[Piece], out: ObjectSendStream[PieceAudio]) -> None:
        async with inp, out:
            try:
                async with self.engine.open_stream() as stream:
                    self.m.tts_stats = stream.stats
                    async with anyio.create_task_group() as feeding:
                        feeding.start_soon(self._feed, inp, stream)
                        await self._read(stream, out)
            except* TtsError as group:
                self.error = "; ".join(str(e) for e in leaves(group))
            finally:
                self.priority.release()  # no more audio is coming: nothing to wait for
                self._end_spans(len(self.m.pieces))
            async for _ in inp:
                pass  # spoken no more, but the reply goes on to its end

    async def _feed(self, inp: ObjectReceiveStream[Piece], stream: TtsStream) -> None:
        timer = self.m.stages["tts"]
        async for piece in inp:
            text = piece.chunk.text.strip()
            if not text:
                continue
            started = time.perf_counter_ns()
            self.log({"event": "tts_input", "text": text})
            self._texts.append(piece.chunk.text)
            self.m.pieces.append(PieceMetrics(chars=len(text)))
            index = len(self.m.pieces) - 1
            self._spans[index] = tracer().start_span(
                "voice.tts.request",
                attributes={
                    "voice.tts.engine": self.engine.name,
                    "voice.piece.index": index,
                    "voice.piece.chars": len(text),
                },
            )
            self.priority.piece_pushed(index)
            await stream.push(text)
            sent = time.perf_counter_ns()
            self.m.pieces[-1].sent_ns = sent
            self.m.stamp("tts_request", sent)
            timer.busy_ns += sent - started
            timer.items += 1
        await stream.end_input()

    async def _read(self, stream: TtsStream, out: ObjectSendStream[PieceAudio]) -> None:
        async for voiced in stream:
            piece = self.m.pieces[voiced.piece]
            if piece.first_audio_ns is None:
                piece.first_audio_ns = voiced.t_ns
                self.m.stamp("tts_first_byte", voiced.t_ns)
                span = self._spans.get(voiced.piece)
                if span is not None:
                    span.add_event("first_byte", timestamp=epoch_ns(voiced.t_ns))
                self._end_spans(voiced.piece)
            piece.audio_seconds += voiced.audio.seconds
            self.m.audio_seconds += voiced.audio.seconds
            self.m.note_audio(voiced.t_ns, voiced.audio.seconds)
            self.priority.audio(voiced.piece, voiced.audio.seconds, voiced.t_ns)
            text = self._texts[voiced.piece]
            await out.send(PieceAudio(voiced.piece, text, voiced.audio, voiced.alignment))

    def _end_spans(self, before: int) -> None:
        """End the spans of the pieces before ``before`` (their audio is all in)."""
        for index in [i for i in self._spans if i < before]:
            span = self._spans.pop(index)
            piece = self.m.pieces[index]
            attributes: dict[str, AttributeValue] = {
                "voice.piece.audio_seconds": round(piece.audio_seconds, 3)
            }
            if piece.first_byte_ms is not None:
                attributes["voice.tts.first_byte_ms"] = round(piece.first_byte_ms, 3)
            span.set_attributes(attributes)
            span.end()


@dataclass(slots=True)
class SpokenPiece:
    """Where a piece's audio lies on the sink's timeline (seconds since the turn
    began); ``aligned``: its audio came with character timings."""

    text: str
    start_s: float
    end_s: float | None = None
    aligned: bool = False


class SinkStage:
    """Writes each piece's audio to the sink in frames of ``FRAME_SECONDS`` and
    records where each piece, and each aligned character, lies on the sink's
    timeline (``pieces``, ``char_ends``: what was heard is read from them).

    Small frames keep every ``write`` short: a real-time sink's write of a whole
    sentence would block until its end fits in the buffer. ``first_audio`` is not
    stamped when a write returns but taken from the sink: the moment playback
    took the turn's first sample (``AudioSink.first_played_ns``).
    """

    def __init__(
        self,
        sink: AudioSink,
        m: TurnMetrics,
        on_piece_start: Callable[[str], None],
        priority: FirstAudioPriority | None = None,
    ) -> None:
        self.sink, self.m, self.on_piece_start = sink, m, on_piece_start
        self.priority = priority if priority is not None else FirstAudioPriority(False)
        self.pieces: list[SpokenPiece] = []
        self.char_ends: list[tuple[str, float]] = []  # aligned characters, when each ends
        self.written_s = 0.0
        self._index: int | None = None

    def note_first_audio(self) -> None:
        """Stamp ``first_audio`` from the sink, once playback has taken this turn's
        audio. Checked after every write and at the end of the turn (after
        ``drain`` or ``stop``), so an interrupted turn that was heard has it too."""
        if self.written_s > 0 and "first_audio" not in self.m.stamps:
            played_ns = self.sink.first_played_ns
            # An earlier time is an earlier turn's, whose utterance was never ended
            # (that turn was cancelled from outside, with no drain or stop).
            if played_ns is not None and played_ns >= self.m.started_ns:
                self.m.stamp("first_audio", played_ns)

    def _start_piece(self, item: PieceAudio) -> None:
        if self.pieces:
            self.pieces[-1].end_s = self.written_s
        text = item.text
        if self.pieces and not text[:1].isspace() and not self.pieces[-1].text[-1:].isspace():
            text = " " + text  # pieces of two text blocks: keep the words apart
        self.pieces.append(SpokenPiece(text, self.written_s, aligned=item.alignment is not None))
        self._index = item.index
        self.on_piece_start(text)

    def _place_chars(self, alignment: Alignment, piece_start: bool) -> None:
        base = self.written_s
        chars = self.char_ends
        if (
            piece_start
            and alignment.chars
            and chars
            and not chars[-1][0].isspace()
            and not alignment.chars[0][:1].isspace()
        ):
            chars.append((" ", base))  # keep the words of two pieces apart
        for char, start, duration in zip(
            alignment.chars, alignment.start_ms, alignment.duration_ms, strict=True
        ):
            chars.append((char, base + (start + duration) / 1000))

    async def run(self, inp: ObjectReceiveStream[PieceAudio]) -> None:
        timer = self.m.stages["sink"]
        async with inp:
            async for item in inp:
                piece_start = item.index != self._index
                if piece_start:
                    self._start_piece(item)
                if item.alignment is not None:
                    self._place_chars(item.alignment, piece_start)
                started = time.perf_counter_ns()
                for frame in _frames(item.audio, self.sink.sample_rate):
                    # A write may queue audio before its first checkpoint: once the
                    # turn is interrupted (and the sink silenced), write nothing more.
                    await checkpoint_if_cancelled()
                    await self.sink.write(frame)
                    self.written_s += frame.seconds
                    self.note_first_audio()
                    if piece_start:  # the piece's first audio is in: the LLM may go on
                        self.priority.played(item.index)
                        piece_start = False
                timer.add(started)
            if self.pieces:
                self.pieces[-1].end_s = self.written_s
            await self.sink.drain()
            self.note_first_audio()
            if self.written_s > 0:
                self.m.stamp("last_audio")


FRAME_SECONDS = 0.02


def _frames(audio: AudioChunk, sink_rate: int) -> Iterator[AudioChunk]:
    """``audio`` in frames of ``FRAME_SECONDS``. Resampled to the sink's rate first
    (when the sink has one): resampling each frame on its own would break the
    waveform at every frame boundary."""
    if sink_rate and audio.sample_rate != sink_rate:
        audio = AudioChunk(resample(audio.samples, audio.sample_rate, sink_rate), sink_rate)
    step = max(1, round(audio.sample_rate * FRAME_SECONDS))
    samples = audio.samples
    for start in range(0, len(samples), step):
        yield AudioChunk(samples[start : start + step], audio.sample_rate)

"""The reply side of a turn: the stages from the LLM to the speakable pieces
(``ReplyStage`` → ``RouteStage`` → ``ChunkStage``; the graph and the items
between them: ``stream_items.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import asdict, replace

import anyio
from anyio import EndOfStream, WouldBlock
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream

from ..chunking import SpeechChunk, SpeechChunker
from ..membrane.membrane import Membrane
from ..membrane.reply import ImagePreview, ReplyError, ReplyResult, Retrying, UsageUpdate
from ..membrane.tools import OnToolCalls
from ..vocab.events import Block, BlockComplete, BlockStart, Chunk, Event
from ..vocab.messages import Request, RequestError
from ..vocab.provider_output import NativeDelta, ProviderOutput, TextDelta, Usage
from ..vocab.spacing import spaced
from .event_log import EventLogger, event_record
from .images import ImageSaver, save_image
from .metrics import TurnMetrics
from .partial_word import ends_mid_word, without_partial_word
from .scheduling import FirstAudioPriority
from .stream_items import Piece, Timed, Visible


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
        self.refused = False  # the request was refused before it was sent
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
            # A text block's end waits for the next event or the reply's end: only
            # then is it known whether the reply failed there (a cut-off word), hit
            # the token limit (an unfinished sentence) or went on. (The next item
            # comes at once: the block's end and what follows are read together.)
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
                        if held is not None and not isinstance(item, _NOT_AN_END):
                            await out.send(_resolved(held, item))
                            held = None
                        if isinstance(item, Chunk | BlockStart | BlockComplete):
                            _note_tool_round(self.m, item, self._last_ns)
                            timer.items += 1
                            timed = Timed(item, self._last_ns)
                            if _is_text_end(item):
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
                            self.m.llm_error = item.kind
                        elif isinstance(item, ReplyResult):
                            self.result = item
                            self.m.stop_reason = str(item.stop_reason)
                if held is not None:
                    await out.send(held)
            except RequestError as exc:
                # A request that cannot be sent (a blob that cannot be read, say) was
                # refused before any network call: the turn ends with its one line.
                self.error = f"request not sent: {exc}"
                self.refused = True
            finally:
                timer.busy_ns += self.membrane.parse_ns - parse_before


def _note_tool_round(m: TurnMetrics, item: Event, at_ns: int) -> None:
    """A tool call starts a round the reply waits on; visible text again ends it
    (its silence is a tool pause, not the TTS falling behind)."""
    if isinstance(item, BlockStart) and item.type == "tool_call":
        m.note_tool_round(at_ns)
    elif isinstance(item, Chunk) and item.meta.visible:
        m.note_reply_goes_on(at_ns)


# Items that say nothing of how a text block ended: counts and previews only.
_NOT_AN_END = (UsageUpdate, ImagePreview, Retrying)


def _resolved(held: Timed, item: object) -> Timed:
    """A text block's end, once the next item says how the reply went on. A
    failure may have cut its last word off — not a stall: the stream was silent
    long enough that the idle flush had spoken what it held, last word included,
    and the stall speaks it the same. The token limit may have cut its last
    sentence. Anything else: the block ended as the model wrote it."""
    if isinstance(item, ReplyError):
        failed = item.kind != "stalled" and ends_mid_word(_text_of(held.event))
        return replace(held, unfinished=failed)
    if isinstance(item, ReplyResult) and item.stop_reason == "max_tokens":
        return replace(held, cut_off=True)
    return held


def _is_text_end(event: Event) -> bool:
    return isinstance(event, BlockComplete) and event.block.type == "text"


def _text_of(event: Event) -> str:
    return event.block.content or "" if isinstance(event, BlockComplete) else ""


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
                        visible = Visible(None, timed.t_ns, timed.unfinished, timed.cut_off)
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
            and spaced(self.visible[-1], text)
        ):
            # Two text blocks (a hidden one between them): each is spoken as its own
            # piece, so the transcript keeps their words apart too, as the spoken text
            # does (a full stop still ends the word before it: "Paris.", not "Paris .").
            self.visible.append(" ")
        self._visible_block = chunk.meta.block_index
        self.visible.append(text)


class ChunkStage:
    """Cuts visible text into pieces; a visible block's end flushes the chunker, so
    text before a tool call is spoken before the call runs. When no text has come
    for the chunker's ``idle_flush_s`` (None: never) what it holds is spoken
    (``flush_held``): a stream that pauses or stalls mid-sentence is not silent
    about what it already said. Time the LLM is held by first-audio ``priority``
    is this pipeline's own wait, not the stream's pause: it does not count."""

    def __init__(
        self, chunker: SpeechChunker, m: TurnMetrics, priority: FirstAudioPriority | None = None
    ) -> None:
        self.chunker, self.m = chunker, m
        self.priority = priority if priority is not None else FirstAudioPriority(False)
        self._fed = False  # text went in since the chunker last let go of what it held

    async def run(
        self, inp: MemoryObjectReceiveStream[Visible], out: ObjectSendStream[Piece]
    ) -> None:
        timer = self.m.stages["chunk"]
        last_ns = 0
        async with inp, out:
            while True:
                try:
                    item = await self._receive(inp)
                except EndOfStream:
                    break
                started = time.perf_counter_ns()
                if item is None:  # a pause: what is held is spoken now
                    chunks = self.chunker.flush_held()
                    self._fed = False
                elif item.text is not None:
                    last_ns = item.t_ns
                    chunks = self.chunker.feed(item.text)
                    self._fed = True
                else:
                    last_ns = item.t_ns
                    flushed = self.chunker.flush(cut_off=item.cut_off)
                    chunks = _without_partial_word(flushed) if item.unfinished else flushed
                    self._fed = False
                timer.add(started)
                for chunk in chunks:
                    await out.send(self._piece(chunk, last_ns))
            for chunk in self.chunker.flush():
                await out.send(self._piece(chunk, last_ns))

    async def _receive(self, inp: MemoryObjectReceiveStream[Visible]) -> Visible | None:
        """The next item, or None once none has come for ``idle_flush_s`` while
        text fed since the last flush may be held."""
        idle_s = self.chunker.idle_flush_s
        if idle_s is None or not self._fed:
            return await inp.receive()
        try:  # text already waiting: no timer to set (a burst costs no more)
            return inp.receive_nowait()
        except WouldBlock:
            pass
        while True:
            with anyio.move_on_after(idle_s):
                return await inp.receive()
            if not self.priority.holding:
                return None

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

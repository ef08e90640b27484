"""A session: engines started once, a conversation of turns.

The LLM provider, TTS engine and sink are started when the session opens and
closed when it ends, so model and voice load times are paid once, not per turn.
Each turn's request holds the system prompt, the conversation so far (user text
and what the assistant actually said — only the heard part of an interrupted
reply) and the new user text; the session's ``Membrane`` formats it for the
provider and runs the tool loop when tools and ``on_tool_calls`` are given, or a
``toolbox`` (MCP servers: ``tools_mcp.McpToolbox``), which the session opens
before its first turn and closes with it.
A long conversation is kept within the model's context by dropping its oldest
turns (``history.py``); the turn's report says how many. Whatever the context,
the kept history is bounded (``max_history_turns``, ``max_history_chars``), a
dropped turn is forgotten, and only the last ``RECENT_RESULTS`` turns keep their
full result (``recent``): a long session's memory stays bounded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from ..chunking import SpeechChunker
from ..membrane.membrane import Membrane
from ..membrane.reply import Retrying
from ..membrane.tools import OnToolCalls, Toolbox, by_name
from ..providers.base import LlmSource
from ..providers.text_source import TextSourceProvider
from ..sinks.base import AudioSink
from ..storage.blobs import BlobError, BlobStore, MemoryBlobStore, sniff_image_type
from ..tts.base import TtsEngine
from ..vocab.blob_source import BlobSource
from ..vocab.messages import (
    Base64Source,
    ContentBlock,
    ImageContent,
    Message,
    ModelConfig,
    Request,
    RequestOptions,
    TextContent,
    ToolDefinition,
)
from .config import PrioritySetting
from .debug_dir import DebugDir
from .event_log import EventLogger
from .greeting import Greeting
from .history import RequestCounter, counter_for, fit
from .images import ImageSaver
from .latency_report import GREETING, TurnEnd
from .scheduling import AHEAD_S, priority_on
from .turn import Turn, TurnResult

# The full results (blocks, report) of this many recent turns are kept; the
# history keeps only what later requests need (~6-9 KB a turn less).
RECENT_RESULTS = 8
# Whatever the model's context, the kept history is bounded: a model with no
# token count and no ``context_tokens`` would otherwise keep every turn.
MAX_HISTORY_TURNS = 1000
MAX_HISTORY_CHARS = 1_000_000

TurnOutcome = Literal["complete", "interrupted", "error"]


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """A turn as the conversation keeps it: what the user said and what they heard.

    ``outcome`` says how the turn ended; a turn interrupted before its first word,
    or failed (``error``), has ``heard`` empty, and the next request then holds two
    user messages in a row, kept apart by every format (never glued together)."""

    user_text: str
    heard: str  # the assistant's heard text, "" when nothing was heard
    participant: str  # who said ``user_text``: in a shared session, not always the same
    attachments: tuple[ContentBlock, ...] = ()  # sent before ``user_text`` (blob images)
    outcome: TurnOutcome = "complete"
    error: str | None = None  # why the turn failed, when it did

    @classmethod
    def of(
        cls,
        user_text: str,
        result: TurnResult,
        participant: str,
        attachments: tuple[ContentBlock, ...] = (),
    ) -> TurnRecord:
        outcome: TurnOutcome = (
            "error"
            if result.error is not None
            else "interrupted"
            if result.interrupted
            else "complete"
        )
        return cls(user_text, result.spoken_text, participant, attachments, outcome, result.error)

    @property
    def chars(self) -> int:
        """Its size in the history's bound: the texts, and an inline image's data."""
        return len(self.user_text) + len(self.heard) + sum(map(_inline_size, self.attachments))


@dataclass
class Session:
    """``llm`` is a ``Membrane``, or an embedded ``LlmSource`` (wrapped in one).

    ``context`` keeps each request within the model's context by dropping the
    oldest turns (``history.py``); by default an embedded model that counts its
    tokens is fitted to its context less ``max_tokens``, and other models are not
    checked. ``on_retry`` hears of each LLM retry as it is decided.

    ``toolbox``: tools opened with the session (before the provider, so a tool
    server that will not start fails the session before a model loads); its
    definitions are offered beside ``tools`` and its calls go to it, other
    calls to ``on_tool_calls``.

    ``blob_store``: where the images of the conversation live (``attach_image``);
    the membrane reads them from it when it builds each request, so only the
    images of turns still kept are read. By default the membrane's own store;
    a membrane without one is given this one. A ``MemoryBlobStore`` keeps only
    what the session still refers to (``_release_blobs``).

    ``debug``: each turn's provider calls and latency report are written there.

    ``first_audio_priority``: hold the LLM while the engine makes a piece's first
    audio (``scheduling.py``); ``"auto"`` when both compute on this machine."""

    llm: Membrane | LlmSource
    engine: TtsEngine
    sink: AudioSink
    system_prompt: str | None = None
    model: ModelConfig = field(default_factory=lambda: ModelConfig(model="default"))
    options: RequestOptions = field(default_factory=RequestOptions)
    tools: list[ToolDefinition] = field(default_factory=list)
    on_tool_calls: OnToolCalls | None = None
    toolbox: Toolbox | None = None
    chunker_options: dict[str, Any] = field(default_factory=dict)
    log: EventLogger = lambda record: None
    on_piece_start: Callable[[str], None] = lambda text: None
    on_turn_start: Callable[[Turn], None] = lambda turn: None
    on_retry: Callable[[Retrying], None] = lambda retrying: None
    context: RequestCounter | None = None
    images: ImageSaver | None = None  # where generated images go (docs/images.md)
    blob_store: BlobStore | None = None
    debug: DebugDir | None = None
    # Names the session on its turns' traces (``gen_ai.conversation.id``): serve's id.
    conversation_id: str | None = None
    first_audio_priority: PrioritySetting = "auto"
    priority_ahead_s: float = AHEAD_S
    greeting: Greeting | None = None  # said or written first (``greet``)
    # The turns still sent, oldest first; a dropped turn is forgotten, not kept.
    history: list[TurnRecord] = field(default_factory=list)
    current: Turn | None = None
    first_kept: int = 0  # how many turns were dropped: ``history[0]`` is turn ``first_kept``
    max_history_turns: int = MAX_HISTORY_TURNS
    max_history_chars: int = MAX_HISTORY_CHARS
    # The last ``RECENT_RESULTS`` turns' full results (blocks, report), newest last.
    recent: deque[TurnResult] = field(default_factory=lambda: deque(maxlen=RECENT_RESULTS))
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    _attached: set[str] = field(default_factory=set)  # blobs attached, not yet in a turn

    def __post_init__(self) -> None:
        self._offered = self.tools  # with the toolbox's, once open
        self._handler = self.on_tool_calls
        llm = self.llm
        if isinstance(llm, Membrane):
            self.membrane = llm
        else:  # an embedded source computes rather than waits: no first-token deadline
            self.membrane = Membrane(TextSourceProvider(llm), first_token_deadline_s=None)
        if self.context is None:
            self.context = counter_for(self.membrane, None)
        # Decided on the provider itself, before a debug folder wraps it.
        self.priority = priority_on(self.first_audio_priority, self.membrane.provider, self.engine)
        if self.debug is not None:  # every provider call written down (debug_dir.py)
            self.membrane.provider = self.debug.wrap(self.membrane.provider)
        if self.blob_store is None:
            self.blob_store = self.membrane.blob_store
        elif self.membrane.blob_store is None:
            self.membrane.blob_store = self.blob_store

    async def __aenter__(self) -> Session:
        async with AsyncExitStack() as stack:
            # If a later part fails to start, the ones already started are closed.
            if self.toolbox is not None:
                self._open_toolbox(await stack.enter_async_context(self.toolbox))
            provider = self.membrane.provider
            await provider.start()
            stack.push_async_callback(provider.aclose)
            if self.membrane.image_tool is not None:  # its client, made on first use
                stack.push_async_callback(self.membrane.image_tool.generator.aclose)
            await self.engine.start()
            stack.push_async_callback(self.engine.aclose)
            await self.sink.open()
            stack.push_async_callback(self.sink.aclose)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    def _open_toolbox(self, toolbox: Toolbox) -> None:
        names = {definition.name for definition in toolbox.definitions}
        clash = sorted(names & {tool.name for tool in self.tools})
        if clash:
            raise ValueError(f"the session's tools and its toolbox both have {clash[0]!r}")
        self._offered = [*self.tools, *toolbox.definitions]
        self._handler = toolbox
        if self.on_tool_calls is not None:
            self._handler = by_name([(names, toolbox)], fallback=self.on_tool_calls)

    async def attach_image(self, data: bytes, media_type: str | None = None) -> ImageContent:
        """``data`` kept in the session's blob store, as an image block for ``turn``'s
        ``attachments``; the media type is read from the bytes when not given.
        ``BlobError`` when there is no store or the bytes are no known image."""
        if self.blob_store is None:
            raise BlobError("no blob store to keep the image in")
        media_type = media_type or sniff_image_type(data)
        if media_type is None:
            raise BlobError("not a PNG, JPEG, GIF or WebP image")
        blob_id = await self.blob_store.store(data, media_type)
        self._attached.add(blob_id)
        source = BlobSource(blob_id=blob_id, media_type=media_type, size_bytes=len(data))
        return ImageContent(source=source)

    def request(
        self,
        user_text: str,
        first: int | None = None,
        participant: str | None = None,
        attachments: tuple[ContentBlock, ...] = (),
    ) -> Request:
        """The next turn's request: the conversation so far from turn ``first`` (by
        default the oldest one still kept), then ``user_text`` said by
        ``participant`` (by default the options' ``human_participant``), who is
        then the request's human participant."""
        options = self.options
        if participant is not None and participant != options.human_participant:
            options = options.model_copy(update={"human_participant": participant})
        assistant = options.assistant_participant
        messages: list[Message] = []
        start = 0 if first is None else max(0, first - self.first_kept)
        for record in self.history[start:]:
            content = _user_content(record.user_text, record.attachments)
            messages.append(Message(participant=record.participant, content=content))
            if record.heard:
                messages.append(Message(participant=assistant, content=record.heard))
        content = _user_content(user_text, attachments)
        messages.append(Message(participant=options.human_participant, content=content))
        return Request(
            messages=messages,
            config=self.model,
            system_prompt=self.system_prompt,
            tools=self._offered,
            options=options,
        )

    def _trace_attributes(self) -> dict[str, str | int]:
        attributes: dict[str, str | int] = {"voice.turn.index": self.turns}
        if self.conversation_id is not None:
            attributes["gen_ai.conversation.id"] = self.conversation_id
        return attributes

    async def turn(
        self,
        user_text: str,
        participant: str | None = None,
        attachments: tuple[ContentBlock, ...] = (),
    ) -> TurnResult:
        """One turn: ``user_text`` said by ``participant`` (by default the options'
        ``human_participant``), answered, spoken, and kept in the history under
        that name; ``attachments`` (images, see ``attach_image``) go before the
        text and stay in the history with it."""
        return await self._turn(user_text, participant, attachments)

    async def greet(self) -> TurnResult | None:
        """The conversation's ``greeting`` as its first turn: said as written, or
        written by the LLM from its instructions; interrupted as any turn is.
        None: there is no greeting, or the conversation has begun (a resumed
        one). A greeting cut before its first word leaves nothing in the history."""
        greeting = self.greeting
        if greeting is None or self.turns or self.current is not None:
            return None
        result = await self._turn(greeting.cue, membrane=greeting.said, end=GREETING)
        if not result.spoken_text:
            self.forget_turn(result)
        return result

    async def _turn(
        self,
        user_text: str,
        participant: str | None = None,
        attachments: tuple[ContentBlock, ...] = (),
        membrane: Membrane | None = None,
        end: TurnEnd | None = None,
    ) -> TurnResult:
        """``membrane``: the one that answers (default: the session's); ``end``:
        why the user's turn ended, when the voice loop will not say."""
        request = self.request(user_text, participant=participant, attachments=attachments)
        context = None
        if self.context is not None:
            request, context = await fit(
                self.first_kept,
                self.turns,
                lambda first: self.request(user_text, first, participant, attachments),
                self.context,
            )
            self._forget(context.dropped - self.first_kept)
        if self.debug is not None:
            self.debug.start_turn()
        turn = Turn(
            membrane=membrane or self.membrane,
            engine=self.engine,
            sink=self.sink,
            request=request,
            on_tool_calls=self._handler,
            chunker=SpeechChunker(**self.chunker_options),
            log=self.log,
            on_piece_start=self.on_piece_start,
            on_retry=self.on_retry,
            context=context,
            images=self.images,
            trace_attributes=self._trace_attributes(),
            first_audio_priority=self.priority,
            priority_ahead_s=self.priority_ahead_s,
        )
        if end is not None:
            turn.metrics.end = end
        self.current = turn
        self.on_turn_start(turn)
        try:
            result = await turn.run()
        finally:
            self.current = None
        if not result.request_refused:  # a refused request would be refused again
            self.history.append(
                TurnRecord.of(user_text, result, request.options.human_participant, attachments)
            )
        self.recent.append(result)
        self._bound()
        self._attached.difference_update(_blob_ids(attachments))
        self._release_blobs()
        if self.debug is not None:
            await self.debug.write_report(result.report)
        return result

    @property
    def turns(self) -> int:
        """Turns in the conversation so far, dropped ones included."""
        return self.first_kept + len(self.history)

    def _forget(self, n: int) -> None:
        """Drop the ``n`` oldest kept turns: they are never sent again."""
        if n > 0:
            del self.history[:n]
            self.first_kept += n

    def _bound(self) -> None:
        """Keep the history within ``max_history_turns`` and ``max_history_chars``
        (the newest turn always stays)."""
        n = max(0, len(self.history) - self.max_history_turns)
        chars = sum(record.chars for record in self.history[n:])
        while n < len(self.history) - 1 and chars > self.max_history_chars:
            chars -= self.history[n].chars
            n += 1
        self._forget(n)

    def _release_blobs(self) -> None:
        """Images held in memory (a ``MemoryBlobStore``, serve's) stay while a turn
        still sent or a recent result refers to them, or they await their turn; a
        folder of blobs is left alone (disk, not memory, and the caller's to keep)."""
        store = self.blob_store
        if not isinstance(store, MemoryBlobStore):
            return
        live = set(self._attached)
        for record in self.history:
            live.update(_blob_ids(record.attachments))
        for result in self.recent:
            live.update(b.image.blob_id for b in result.blocks if b.image and b.image.blob_id)
        store.retain(live)

    def interrupt(self) -> bool:
        """Interrupt the running turn, if any; True if there was one."""
        if self.current is None:
            return False
        self.current.interrupt()
        return True

    def pause_playout(self) -> bool:
        """Hold the running turn's audio where it is (the user may be speaking
        over it); True if it is held. The LLM and TTS go on until the sink's
        buffer is full; ``resume_playout`` plays on, ``interrupt`` discards."""
        return self.current is not None and self.sink.pause()

    def resume_playout(self) -> None:
        self.sink.resume()

    def hold_playout(self) -> bool:
        """Hold the audio of the next turn before it starts (a reply begun before
        the user is surely done): its first write finds the sink paused, nothing
        is heard until ``resume_playout``; ``interrupt`` throws it away. False (and
        nothing held) while a turn runs or when the sink cannot hold (not real time)."""
        return self.current is None and self.sink.pause()

    def forget_turn(self, result: TurnResult) -> None:
        """Take back the last turn, ``result``'s, as if it never happened: a held
        reply thrown away unheard leaves neither its user text nor its reply."""
        if self.recent and self.recent[-1] is result:
            self.recent.pop()
        if not result.request_refused and self.history:
            self.history.pop()
        self._release_blobs()


def _inline_size(block: ContentBlock) -> int:
    if isinstance(block, ImageContent) and isinstance(block.source, Base64Source):
        return len(block.source.data)
    return 0  # an image by blob id or URL: a reference


def _blob_ids(attachments: tuple[ContentBlock, ...]) -> Iterator[str]:
    for block in attachments:
        if isinstance(block, ImageContent) and isinstance(block.source, BlobSource):
            yield block.source.blob_id


def _user_content(text: str, attachments: tuple[ContentBlock, ...]) -> list[ContentBlock]:
    return [*attachments, TextContent(text=text)]

"""A session: engines started once, a conversation of turns.

The LLM provider, TTS engine and sink are started when the session opens and
closed when it ends, so model and voice load times are paid once, not per turn.
Each turn's request holds the system prompt, the conversation so far (user text
and what the assistant actually said — only the heard part of an interrupted
reply) and the new user text; the session's ``Membrane`` formats it for the
provider and runs the tool loop when tools and ``on_tool_calls`` are given.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from ..chunking import SpeechChunker
from ..membrane import Membrane
from ..messages import Message, ModelConfig, Request, RequestOptions, ToolDefinition
from ..providers.base import LlmSource
from ..providers.text_source import TextSourceProvider
from ..sinks.base import AudioSink
from ..tools import OnToolCalls
from ..tts.base import TtsEngine
from .stages import EventLogger
from .turn import Turn, TurnResult


@dataclass(frozen=True, slots=True)
class TurnRecord:
    user_text: str
    result: TurnResult


@dataclass
class Session:
    """``llm`` is a ``Membrane``, or an embedded ``LlmSource`` (wrapped in one)."""

    llm: Membrane | LlmSource
    engine: TtsEngine
    sink: AudioSink
    system_prompt: str | None = None
    model: ModelConfig = field(default_factory=lambda: ModelConfig(model="default"))
    options: RequestOptions = field(default_factory=RequestOptions)
    tools: list[ToolDefinition] = field(default_factory=list)
    on_tool_calls: OnToolCalls | None = None
    chunker_options: dict[str, Any] = field(default_factory=dict)
    log: EventLogger = lambda record: None
    on_piece_start: Callable[[str], None] = lambda text: None
    on_turn_start: Callable[[Turn], None] = lambda turn: None
    history: list[TurnRecord] = field(default_factory=list)
    current: Turn | None = None
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    def __post_init__(self) -> None:
        llm = self.llm
        self.membrane = llm if isinstance(llm, Membrane) else Membrane(TextSourceProvider(llm))

    async def __aenter__(self) -> Session:
        async with AsyncExitStack() as stack:
            # If a later part fails to start, the ones already started are closed.
            provider = self.membrane.provider
            await provider.start()
            stack.push_async_callback(provider.aclose)
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

    def request(self, user_text: str) -> Request:
        """The next turn's request: the conversation so far, then ``user_text``."""
        user, assistant = self.options.human_participant, self.options.assistant_participant
        messages: list[Message] = []
        for record in self.history:
            messages.append(Message(participant=user, content=record.user_text))
            if record.result.spoken_text:
                messages.append(Message(participant=assistant, content=record.result.spoken_text))
        messages.append(Message(participant=user, content=user_text))
        return Request(
            messages=messages,
            config=self.model,
            system_prompt=self.system_prompt,
            tools=self.tools,
            options=self.options,
        )

    async def turn(self, user_text: str) -> TurnResult:
        turn = Turn(
            membrane=self.membrane,
            engine=self.engine,
            sink=self.sink,
            request=self.request(user_text),
            on_tool_calls=self.on_tool_calls,
            chunker=SpeechChunker(**self.chunker_options),
            log=self.log,
            on_piece_start=self.on_piece_start,
        )
        self.current = turn
        self.on_turn_start(turn)
        try:
            result = await turn.run()
        finally:
            self.current = None
        self.history.append(TurnRecord(user_text, result))
        return result

    def interrupt(self) -> bool:
        """Interrupt the running turn, if any; True if there was one."""
        if self.current is None:
            return False
        self.current.interrupt()
        return True

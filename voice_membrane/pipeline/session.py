"""A session: engines started once, a conversation of turns.

The LLM source, TTS engine and sink are started when the session opens and
closed when it ends, so model and voice load times are paid once, not per turn.
Each turn's messages are the system prompt, the conversation so far (user text
and what the assistant actually said — only the heard part of an interrupted
reply) and the new user text.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from ..chunking import SpeechChunker
from ..providers.base import ChatMessage, LlmSource
from ..sinks.base import AudioSink
from ..tts.base import TtsEngine
from .stages import EventLogger
from .turn import Turn, TurnResult


@dataclass(frozen=True, slots=True)
class TurnRecord:
    user_text: str
    result: TurnResult


@dataclass
class Session:
    source: LlmSource
    engine: TtsEngine
    sink: AudioSink
    system_prompt: str | None = None
    chunker_options: dict[str, Any] = field(default_factory=dict)
    log: EventLogger = lambda record: None
    on_piece_start: Callable[[str], None] = lambda text: None
    on_turn_start: Callable[[Turn], None] = lambda turn: None
    history: list[TurnRecord] = field(default_factory=list)
    current: Turn | None = None
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    async def __aenter__(self) -> Session:
        async with AsyncExitStack() as stack:
            # If a later part fails to start, the ones already started are closed.
            await self.source.start()
            stack.push_async_callback(self.source.aclose)
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

    def messages(self, user_text: str) -> list[ChatMessage]:
        messages = [ChatMessage("system", self.system_prompt)] if self.system_prompt else []
        for record in self.history:
            messages.append(ChatMessage("user", record.user_text))
            if record.result.spoken_text:
                messages.append(ChatMessage("assistant", record.result.spoken_text))
        messages.append(ChatMessage("user", user_text))
        return messages

    async def turn(self, user_text: str) -> TurnResult:
        turn = Turn(
            source=self.source,
            engine=self.engine,
            sink=self.sink,
            messages=self.messages(user_text),
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

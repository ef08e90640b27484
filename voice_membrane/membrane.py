"""Membrane: one object that turns a request into a stream of logical events.

``Membrane(provider, formatter=…)`` formats a ``Request``, calls the provider,
reads its output — raw text through the formatter's XML parser (prefill mode),
native blocks through ``NativeBlockAssembler`` (chat mode) — and yields the one
event vocabulary either way, then runs the tool loop::

    async for item in membrane.stream(request, on_tool_calls=run_tools):
        if isinstance(item, Chunk) and item.meta.visible:
            speak(item.text)

The loop: when a reply round ends with tool calls and ``on_tool_calls`` is
given, the calls run (bounded by ``tool_timeout_s``), their results flow out as
``tool_result`` blocks, and the conversation continues — prefill: the results
are appended as ``<function_results>`` and the assistant turn is resumed; chat:
native tool_use / tool_result messages — up to ``max_tool_depth`` rounds. In
prefill mode a stop sequence met inside an open hidden block (a participant
line quoted in thinking, say) is a false positive: the stop text is put back
and the turn resumed, unless a resume made no progress.

Retryable errors before a call's first output are retried (``retry.py``); an
error after it ends the reply with a ``ReplyError``, keeping what was produced.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Literal

import anyio

from .events import Block, BlockComplete, BlockStart, Chunk, Event
from .formats import Formatter, get_formatter
from .formats.base import BuiltRequest
from .messages import (
    ContentBlock,
    Message,
    RedactedThinkingContent,
    Request,
    TextContent,
    ThinkingContent,
    ToolResultContent,
    ToolUseContent,
    validate_request,
)
from .parse import NativeBlockAssembler, XmlStreamParser
from .providers.base import (
    LlmError,
    Provider,
    ProviderError,
    ProviderOutput,
    StopInfo,
    TextDelta,
    Usage,
)
from .reply import MembraneItem, ReplyError, ReplyResult, Retrying, UsageUpdate
from .retry import RetryPolicy
from .tools import OnToolCalls, ToolCall, run_tool_calls

FUNCTION_CALLS_END = "</function_calls>"
MAX_RESUMES = 8  # stop-sequence false positives resumed per reply, at most


@dataclass
class _Round:
    """What one provider call produced."""

    raw: list[str] = field(default_factory=list)  # prefill: the text as written
    blocks: list[Block] = field(default_factory=list)
    stop: StopInfo | None = None
    usage: Usage = field(default_factory=Usage)
    error: ProviderError | None = None
    produced: bool = False
    written_back: str = ""  # prefill: a stop sequence put back after the raw text


class Membrane:
    def __init__(
        self,
        provider: Provider,
        formatter: Formatter | str = "native",
        *,
        retry: RetryPolicy | None = None,
        max_tool_depth: int = 10,
        tool_timeout_s: float = 30.0,
        streaming: bool = True,
    ) -> None:
        self.provider = provider
        self.formatter = get_formatter(formatter) if isinstance(formatter, str) else formatter
        self.retry = retry if retry is not None else RetryPolicy()
        self.max_tool_depth = max_tool_depth
        self.tool_timeout_s = tool_timeout_s
        self.streaming = streaming
        self.parse_ns = 0  # time spent in the parser/assembler (for stage metrics)

    async def stream(
        self,
        request: Request,
        *,
        formatter: Formatter | str | None = None,
        on_tool_calls: OnToolCalls | None = None,
        on_chunk: Callable[[str, Chunk], None] | None = None,
        on_block: Callable[[BlockStart | BlockComplete], None] | None = None,
        on_usage: Callable[[UsageUpdate], None] | None = None,
        on_output: Callable[[ProviderOutput], None] | None = None,
    ) -> AsyncGenerator[MembraneItem, None]:
        """Yield the reply's events, ending with one ``ReplyResult``.

        The callbacks are a thin layer: each is called as its item passes
        (``on_chunk(text, chunk)``, ``on_block(event)``, ``on_usage(update)``);
        ``on_output`` sees every raw provider item (for timing). A request that
        cannot be sent raises ``RequestError`` before any network call.
        """
        fmt = self._formatter(request, formatter)
        validate_request(request)
        built = fmt.build(request)
        run = _Reply(self, fmt, request, built, on_tool_calls, on_output)
        async with aclosing(run.items()) as items:
            async for item in items:
                if isinstance(item, Chunk):
                    if on_chunk is not None:
                        on_chunk(item.text, item)
                elif isinstance(item, BlockStart | BlockComplete):
                    if on_block is not None:
                        on_block(item)
                elif isinstance(item, UsageUpdate) and on_usage is not None:
                    on_usage(item)
                yield item

    async def complete(self, request: Request, **options: object) -> ReplyResult:
        """Run ``stream`` to its end and return the result."""
        result: ReplyResult | None = None
        async with aclosing(self.stream(request, **options)) as items:  # type: ignore[arg-type]
            async for item in items:
                if isinstance(item, ReplyResult):
                    result = item
        assert result is not None
        return result

    def _formatter(self, request: Request, override: Formatter | str | None) -> Formatter:
        chosen = override if override is not None else request.options.formatter
        if chosen is None:
            return self.formatter
        return get_formatter(chosen) if isinstance(chosen, str) else chosen


class _Reply:
    """One ``Membrane.stream`` call: the calls of a reply and its tool loop."""

    def __init__(
        self,
        membrane: Membrane,
        formatter: Formatter,
        request: Request,
        built: BuiltRequest,
        on_tool_calls: OnToolCalls | None,
        on_output: Callable[[ProviderOutput], None] | None,
    ) -> None:
        self.m, self.fmt, self.request, self.built = membrane, formatter, request, built
        self.on_tool_calls, self.on_output = on_tool_calls, on_output
        self.mode: Literal["prefill", "chat"] = built.mode
        self.parser: XmlStreamParser | None = None
        if built.mode == "prefill":
            self.parser = formatter.create_parser(built.prefill or "") or XmlStreamParser(
                built.prefill or ""
            )
        self.assembler = NativeBlockAssembler()
        self.blocks: list[Block] = []
        self.messages: list[Message] = []
        self.usage = Usage()
        self.tool_rounds = 0

    async def items(self) -> AsyncGenerator[MembraneItem, None]:
        resumes = 0
        while True:
            round_ = _Round()
            async with aclosing(self._call(round_)) as call_items:
                async for item in call_items:
                    yield item
            self.usage = self.usage + round_.usage
            if round_.error is not None:
                for event in self._flush(round_):
                    yield event
                error = round_.error
                yield ReplyError(
                    error.kind, str(error), error.provider, error.status, round_.produced
                )
                yield self._result(round_, "error", str(error))
                return
            stop = round_.stop or StopInfo("end_turn")
            # Prefill: the stop sequence that ended the call, written back if it belongs.
            prefill = self.mode == "prefill" and self.parser is not None
            if prefill and self._stopped_after_calls(round_, stop):
                assert self.parser is not None
                round_.written_back = FUNCTION_CALLS_END
                for event in self._feed_text(FUNCTION_CALLS_END, round_):
                    yield event
            elif prefill and stop.reason == "stop_sequence" and stop.stop_sequence:
                assert self.parser is not None
                if stop.stop_sequence == FUNCTION_CALLS_END and self.parser.inside_hidden:
                    round_.written_back = stop.stop_sequence
                    for event in self._feed_text(stop.stop_sequence, round_):
                        yield event
                elif self.parser.inside_hidden and resumes < MAX_RESUMES and round_.produced:
                    # A false positive inside thinking or a call: put it back, go on.
                    resumes += 1
                    round_.written_back = stop.stop_sequence
                    for event in self._feed_text(stop.stop_sequence, round_):
                        yield event
                    self._continue_prefill("".join(round_.raw) + round_.written_back)
                    continue
            calls = [
                ToolCall(b.tool_id or "", b.tool_name or "", dict(b.input or {}))
                for b in round_.blocks
                if b.type == "tool_call"
            ]
            if not calls or self.on_tool_calls is None or self.tool_rounds >= self.m.max_tool_depth:
                for event in self._flush(round_):
                    yield event
                yield self._result(round_, stop.reason, None)
                return
            self.tool_rounds += 1
            results = await run_tool_calls(calls, self.on_tool_calls, self.m.tool_timeout_s)
            for event in self._emit_results(calls, results, round_):
                yield event
            resumes = 0

    def _stopped_after_calls(self, round_: _Round, stop: StopInfo) -> bool:
        """Prefill: the call ended right after a tool call, inside ``<function_calls>``.
        Some servers honour the ``</function_calls>`` stop without naming it (OpenAI
        Completions says only "stop"), so the parser's state decides, not the name."""
        assert self.parser is not None
        if stop.reason == "max_tokens" or not self.parser.inside_hidden or not round_.blocks:
            return False
        named = stop.stop_sequence
        return round_.blocks[-1].type == "tool_call" and named in (None, FUNCTION_CALLS_END)

    # ------------------------------------------------------------ one call

    async def _call(self, round_: _Round) -> AsyncGenerator[MembraneItem, None]:
        """One provider call with retries; fills ``round_``, never raises ProviderError."""
        retry = 0
        while True:
            try:
                async with aclosing(
                    self.m.provider.stream(
                        self.built, self.request.config, streaming=self.m.streaming
                    )
                ) as outputs:
                    async for output in outputs:
                        if self.on_output is not None:
                            self.on_output(output)
                        for item in self._take(output, round_):
                            yield item
                return
            except ProviderError as exc:
                error = exc
            except LlmError as exc:  # a local source's failure: not retryable
                error = ProviderError(self.m.provider.name, "stream", str(exc))
            if round_.produced or not self.m.retry.should_retry(retry, error):
                round_.error = error
                return
            delay = self.m.retry.delay_s(retry, error)
            retry += 1
            yield Retrying(retry, delay, str(error))
            await anyio.sleep(delay)

    def _take(self, output: ProviderOutput, round_: _Round) -> list[MembraneItem]:
        if isinstance(output, Usage):
            round_.usage = output
            return [UsageUpdate(output, self.usage + output)]
        if isinstance(output, StopInfo):
            round_.stop = output
            return []
        round_.produced = True
        if isinstance(output, TextDelta):
            if self.parser is None:
                # Raw text in chat mode (an embedded model's chat reply): XML is
                # still read, so thinking or calls it writes are never spoken.
                self.parser = XmlStreamParser()
            round_.raw.append(output.text)
            return list(self._feed_text(output.text, round_))
        started = time.perf_counter_ns()
        events = self.assembler.feed(output)
        self.m.parse_ns += time.perf_counter_ns() - started
        return list(self._record(events, round_))

    def _feed_text(self, text: str, round_: _Round) -> list[Event]:
        assert self.parser is not None
        started = time.perf_counter_ns()
        events = self.parser.feed(text)
        self.m.parse_ns += time.perf_counter_ns() - started
        return self._record(events, round_)

    def _record(self, events: list[Event], round_: _Round) -> list[Event]:
        for event in events:
            if isinstance(event, BlockComplete):
                round_.blocks.append(event.block)
                self.blocks.append(event.block)
        return events

    def _flush(self, round_: _Round) -> list[Event]:
        events = self.parser.flush() if self.parser is not None else []
        events += self.assembler.flush()
        return self._record(events, round_)

    # ------------------------------------------------------------ tool loop

    def _emit_results(
        self, calls: list[ToolCall], results: list[ToolResultContent], round_: _Round
    ) -> list[Event]:
        names = {call.id: call.name for call in calls}
        events: list[Event] = []
        if self.mode == "prefill":
            text = self.fmt.format_tool_results(results)
            events = self._feed_text(text, round_)
            self._continue_prefill("".join(round_.raw) + round_.written_back + text)
            return events
        events += self.assembler.flush()
        for result in results:
            events += self.assembler.tool_result(
                result.tool_use_id,
                result.text(),
                tool_name=names.get(result.tool_use_id),
                is_error=result.is_error,
            )
        events = self._record(events, round_)
        assistant = Message(
            participant=self.request.options.assistant_participant,
            content=[c for b in round_.blocks if (c := _content_of(b)) is not None],
        )
        results_message = Message(
            participant=self.request.options.human_participant, content=list(results)
        )
        self.messages += [assistant, results_message]
        self.request = self.request.model_copy(
            update={"messages": [*self.request.messages, assistant, results_message]}
        )
        self.built = self.fmt.build(self.request)
        return events

    def _continue_prefill(self, appended: str) -> None:
        built = self.built
        self.built = replace(
            built,
            prefill=(built.prefill or "") + appended,
            prompt=None if built.prompt is None else built.prompt + appended,
        )

    def _result(self, round_: _Round, stop: str, error: str | None) -> ReplyResult:
        final = [c for b in round_.blocks if (c := _content_of(b)) is not None]
        messages = list(self.messages)
        if self.mode == "prefill":
            text = "".join(b.content or "" for b in self.blocks if b.type == "text")
            messages = [
                Message(participant=self.request.options.assistant_participant, content=text)
            ]
        elif final:
            messages.append(
                Message(participant=self.request.options.assistant_participant, content=final)
            )
        return ReplyResult(
            blocks=tuple(self.blocks),
            text="".join(b.content or "" for b in self.blocks if b.type == "text"),
            stop_reason=stop,
            usage=self.usage,
            tool_rounds=self.tool_rounds,
            messages=tuple(messages),
            error=error,
        )


def _content_of(block: Block) -> ContentBlock | None:
    """A completed chat-mode block as content for the next request."""
    if block.type == "text":
        return TextContent(text=block.content or "")
    if block.type == "thinking":
        if block.redacted_data is not None:
            return RedactedThinkingContent(data=block.redacted_data)
        return ThinkingContent(thinking=block.content or "", signature=block.signature)
    if block.type == "tool_call":
        return ToolUseContent(
            id=block.tool_id or "",
            name=block.tool_name or "",
            input=dict(block.input or {}),
            signature=block.signature,
        )
    return None  # tool results are sent as their own message

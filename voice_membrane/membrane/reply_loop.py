"""One ``Membrane.stream`` call: the provider calls of a reply and its tool loop.

``ReplyLoop.items()`` makes a call (retried while nothing has arrived), reads
its output into events — raw text through the XML parser, native blocks through
``NativeBlockAssembler``, one index sequence for both — and decides what comes
next: the end, a resume after a false stop, or tool calls and another call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Literal, Protocol

from ..formats import Formatter
from ..formats.base import BuiltRequest
from ..parse import NativeBlockAssembler, XmlStreamParser
from ..parse.json_tools import JsonToolInterceptor, JsonToolsInText
from ..parse.policy import PolicyRunners, StreamPolicy
from ..providers.base import Provider
from ..vendors.errors import ProviderError
from ..vendors.retry import RetryPolicy
from ..vocab.events import Block, BlockComplete, BlockStart, Event
from ..vocab.messages import (
    Request,
    ToolResultContent,
    ToolUseContent,
)
from ..vocab.provider_output import (
    NativeImage,
    NativeStart,
    ProviderOutput,
    StopInfo,
    TextDelta,
    Usage,
    clean_output,
)
from .images import ImageStore, ImageTool, result_text, stored_output, tool_arguments
from .provider_call import CallRound, ProviderCall
from .reply import ImagePreview, MembraneItem, ReplyError, ReplyResult, UsageUpdate
from .reply_messages import continued_prefill, conversation, with_chat_results, with_native_results
from .tools import OnToolCalls, ToolCall, run_tool_calls

_log = logging.getLogger(__name__)
FUNCTION_CALLS_END = "</function_calls>"
MAX_RESUMES = 8  # stop-sequence false positives resumed per reply, at most


class ReplySettings(Protocol):
    """What a reply runs with (a ``Membrane`` is one): the provider and the
    policies of its calls. ``parse_ns`` adds up the time spent parsing."""

    provider: Provider
    retry: RetryPolicy
    streaming: bool
    max_tool_depth: int
    tool_timeout_s: float
    first_token_deadline_s: float | None
    parse_ns: int
    json_tools: Callable[[], JsonToolInterceptor] | None
    image_tool: ImageTool | None
    image_store: ImageStore | None


class ReplyLoop:
    """The state of one reply across its calls."""

    def __init__(
        self,
        membrane: ReplySettings,
        formatter: Formatter,
        request: Request,
        built: BuiltRequest,
        on_tool_calls: OnToolCalls | None,
        on_output: Callable[[ProviderOutput], None] | None,
        policies: Sequence[StreamPolicy] = (),
    ) -> None:
        self.m, self.fmt, self.request, self.built = membrane, formatter, request, built
        self.on_tool_calls, self.on_output = on_tool_calls, on_output
        self.policies = PolicyRunners(list(policies))
        self.rejected: dict[str, str] = {}  # tool id → why a policy rejected the call
        self.mode: Literal["prefill", "chat"] = built.mode
        self.parser: XmlStreamParser | None = None
        if built.mode == "prefill":
            # Seeded with the open assistant turn only: what earlier turns and other
            # participants wrote never changes how the reply is read.
            self.parser = formatter.create_parser(built.open_turn) or XmlStreamParser(
                built.open_turn
            )
            self.parser.reserve_ids(
                block.id
                for message in request.messages
                for block in message.content
                if isinstance(block, ToolUseContent)
            )
        self.assembler = NativeBlockAssembler()
        self.json_tools: JsonToolsInText | None = None
        if membrane.json_tools is not None:
            interceptor = membrane.json_tools()
            interceptor.reserve_ids(
                block.id
                for message in request.messages
                for block in message.content
                if isinstance(block, ToolUseContent)
            )
            self.json_tools = JsonToolsInText(interceptor)
        self.blocks: list[Block] = []
        self.usage = Usage()
        self.tool_rounds = 0
        self._image_index: int | None = None  # the last image block started (as emitted)

    async def items(self) -> AsyncGenerator[MembraneItem, None]:
        resumes = 0
        while True:
            if self.policies.terminated is not None:  # (while a tool round was fed)
                yield self._result("policy", None, terminated=self.policies.terminated)
                return
            round_ = CallRound()
            provider_call = ProviderCall(
                self.m, self.built, self.request.config, self.mode, self._take, self._ended
            )
            async with aclosing(provider_call.run(round_)) as call_items:
                async for item in call_items:
                    yield item
            self.usage = self.usage + round_.usage
            if self.policies.terminated is not None:
                yield self._result("policy", None, terminated=self.policies.terminated)
                return
            if round_.error is not None:
                for event in self._flush(round_):
                    yield event
                error = round_.error
                yield ReplyError(
                    error.kind, str(error), error.provider, error.status, round_.produced
                )
                yield self._result("error", str(error))
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
            for event in self._settle(round_):
                yield event
            calls = runnable_calls(round_.blocks)
            if not any(map(self._can_run, calls)) or self.tool_rounds >= self.m.max_tool_depth:
                for event in self._flush(round_):
                    yield event
                yield self._result(stop.reason, None)
                return
            self.tool_rounds += 1
            answered: dict[str, ToolResultContent] = {}
            for call in calls:
                if self._is_image_call(call) and call.id not in self.rejected:
                    async with aclosing(self._generate_image(call, round_, answered)) as made:
                        async for item in made:
                            yield item
            results = await self._run_calls(
                [call for call in calls if call.id not in answered], self.on_tool_calls
            )
            ran = iter(results)
            results = [answered[call.id] if call.id in answered else next(ran) for call in calls]
            for event in self._emit_results(calls, results, round_):
                yield event
            resumes = 0

    def _stopped_after_calls(self, round_: CallRound, stop: StopInfo) -> bool:
        """Prefill: the call ended right after a tool call, inside ``<function_calls>``.
        Some servers honour the ``</function_calls>`` stop without naming it (OpenAI
        Completions says only "stop"), so the parser's state decides, not the name."""
        assert self.parser is not None
        if stop.reason == "max_tokens" or not self.parser.inside_hidden or not round_.blocks:
            return False
        named = stop.stop_sequence
        return round_.blocks[-1].type == "tool_call" and named in (None, FUNCTION_CALLS_END)

    # ------------------------------------------------------------ one call

    async def _take(self, output: ProviderOutput, round_: CallRound) -> list[MembraneItem]:
        """One output of the provider, on its way to be read."""
        output = clean_output(output)  # where model text enters: no lone surrogates
        output = await self._store(output)
        if self.on_output is not None:
            self.on_output(output)
        return self._read(output, round_)

    def _ended(self) -> bool:
        return self.policies.terminated is not None

    def _read(self, output: ProviderOutput, round_: CallRound) -> list[MembraneItem]:
        if isinstance(output, Usage):
            round_.usage = output
            self.policies.note_usage(self.usage + output)
            return [UsageUpdate(output, self.usage + output)]
        if isinstance(output, StopInfo):
            round_.stop = output
            self.policies.note_stop(output.reason)
            return []
        round_.produced = True
        if isinstance(output, NativeImage) and output.image.is_preview:
            opened = self.assembler.feed(output)  # (opens the image block if none is)
            items: list[MembraneItem] = list(self._record(opened, round_))
            if self._image_index is not None:
                items.append(ImagePreview(self._image_index, output.image))
            return items
        if isinstance(output, TextDelta):
            if self.parser is None:
                # Raw text in chat mode (an embedded model's chat reply): XML is
                # still read, so thinking or calls it writes are never spoken.
                self.parser = XmlStreamParser()
            round_.raw.append(output.text)
            self.parser.skip_to(self.assembler.next_block_index)
            return list(self._feed_text(output.text, round_))
        events: list[Event] = []
        if self.parser is not None and isinstance(output, NativeStart):
            # A native block beside prefill text (native tools in a prefill format):
            # the text so far ends here, and the indices run on from it.
            events = self.parser.flush()
            self.assembler.skip_to(self.parser.next_block_index)
        started = time.perf_counter_ns()
        events += self.assembler.feed(output)
        self.m.parse_ns += time.perf_counter_ns() - started
        if self.parser is not None:
            round_.native_calls += [  # (a nameless call is stray text, never run)
                e.block
                for e in events
                if isinstance(e, BlockComplete)
                and e.block.type == "tool_call"
                and e.block.tool_name
            ]
        return list(self._record(events, round_))

    def _feed_text(self, text: str, round_: CallRound) -> list[Event]:
        assert self.parser is not None
        started = time.perf_counter_ns()
        events = self.parser.feed(text)
        self.m.parse_ns += time.perf_counter_ns() - started
        return self._record(events, round_)

    def _record(self, events: list[Event], round_: CallRound) -> list[Event]:
        """Events through the JSON tool reader and the policies, then what passed
        kept as the reply's."""
        if self.json_tools is not None:
            events = self.json_tools.feed(events)
        if self.policies:
            events = self.policies.feed(events)
            self._keep_rejected(round_)
        for event in events:
            if isinstance(event, BlockComplete):
                round_.blocks.append(event.block)
                self.blocks.append(event.block)
            elif isinstance(event, BlockStart) and event.type == "image":
                self._image_index = event.index
        return events

    def _flush(self, round_: CallRound) -> list[Event]:
        events = self.parser.flush() if self.parser is not None else []
        if self.parser is not None:  # held stray text comes after the parser's blocks
            self.assembler.skip_to(self.parser.next_block_index)
        events += self.assembler.flush()
        return self._record(events, round_) + self._settle(round_)

    # ------------------------------------------------------------ policies

    def _settle(self, round_: CallRound) -> list[Event]:
        """The call's stream ended: what a policy still holds is decided."""
        if not self.policies:
            return []
        events = self.policies.settle()
        self._keep_rejected(round_)
        for event in events:
            if isinstance(event, BlockComplete):
                round_.blocks.append(event.block)
                self.blocks.append(event.block)
        return events

    def _keep_rejected(self, round_: CallRound) -> None:
        """A rejected tool call stays in the reply (the model sees its call
        answered with an error), but never runs."""
        for block, reason in self.policies.take_rejected():
            if block.tool_id:
                self.rejected[block.tool_id] = reason
                round_.blocks.append(block)
                self.blocks.append(block)

    # ------------------------------------------------------------ images

    def _is_image_call(self, call: ToolCall) -> bool:
        tool = self.m.image_tool
        return tool is not None and call.name == tool.name

    def _can_run(self, call: ToolCall) -> bool:
        return self.on_tool_calls is not None or self._is_image_call(call)

    async def _store(self, output: ProviderOutput) -> ProviderOutput:
        return await stored_output(output, self.m.image_store)

    async def _generate_image(
        self, call: ToolCall, round_: CallRound, answered: dict[str, ToolResultContent]
    ) -> AsyncGenerator[MembraneItem, None]:
        """Run the image tool's generator for ``call``: its image block flows out
        (partial images as ``ImagePreview``), its result is put in ``answered``.
        A failure is the call's error result, never the reply's end."""
        tool = self.m.image_tool
        assert tool is not None
        arguments = tool_arguments(call.input)
        if isinstance(arguments, str):
            answered[call.id] = ToolResultContent(
                tool_use_id=call.id, content=arguments, is_error=True
            )
            return
        prompt, size, quality = arguments
        if self.parser is not None:
            self.assembler.skip_to(self.parser.next_block_index)
        before = len(self.blocks)
        error: str | None = None
        try:
            async with aclosing(tool.generator.generate(prompt, size=size, quality=quality)) as out:
                async for output in out:
                    for item in self._read(await self._store(clean_output(output)), round_):
                        yield item
        except ProviderError as exc:
            error = str(exc)
        for event in self._record(self.assembler.flush(), round_):
            yield event
        if self.parser is not None:
            self.parser.skip_to(self.assembler.next_block_index)
        images = [b.image for b in self.blocks[before:] if b.type == "image"]
        image = images[-1] if images else None
        if error is not None or image is None:
            why = error or "the generator produced no image"
            answered[call.id] = ToolResultContent(
                tool_use_id=call.id, content=f"image generation failed: {why}", is_error=True
            )
            return
        answered[call.id] = ToolResultContent(tool_use_id=call.id, content=result_text(image))

    async def _run_calls(
        self, calls: list[ToolCall], handler: OnToolCalls | None
    ) -> list[ToolResultContent]:
        allowed = [call for call in calls if call.id not in self.rejected]
        if allowed and handler is None:  # only image calls could run this round
            return [
                ToolResultContent(
                    tool_use_id=call.id,
                    content=f"not run: {self.rejected.get(call.id, 'no handler for this tool')}",
                    is_error=True,
                )
                for call in calls
            ]
        ran = iter(
            await run_tool_calls(allowed, handler, self.m.tool_timeout_s)
            if allowed and handler is not None
            else []
        )
        return [
            ToolResultContent(
                tool_use_id=call.id,
                content=f"not run: {self.rejected[call.id]}",
                is_error=True,
            )
            if call.id in self.rejected
            else next(ran)
            for call in calls
        ]

    # ------------------------------------------------------------ tool loop

    def _emit_results(
        self, calls: list[ToolCall], results: list[ToolResultContent], round_: CallRound
    ) -> list[Event]:
        names = {call.id: call.name for call in calls}
        events: list[Event] = []
        if self.mode == "prefill" and round_.native_calls:
            return self._native_results_in_prefill(names, results, round_)
        if self.mode == "prefill":
            text = self.fmt.format_tool_results(results)
            events = self._feed_text(text, round_)
            self._continue_prefill("".join(round_.raw) + round_.written_back + text)
            return events
        events = self._result_blocks(names, results, round_)
        self.request = with_chat_results(self.request, round_.blocks, results)
        self.built = self.fmt.build(self.request)
        return events

    def _native_results_in_prefill(
        self, names: dict[str, str], results: list[ToolResultContent], round_: CallRound
    ) -> list[Event]:
        """Native tool calls in a prefill format (``with_native_results``)."""
        events = self._result_blocks(names, results, round_)
        assert self.parser is not None
        self.parser.skip_to(self.assembler.next_block_index)
        self.built = with_native_results(
            self.built, "".join(round_.raw), round_.native_calls, results
        )
        return events

    def _result_blocks(
        self, names: dict[str, str], results: list[ToolResultContent], round_: CallRound
    ) -> list[Event]:
        events = self.assembler.flush()
        for result in results:
            events += self.assembler.tool_result(
                result.tool_use_id,
                result.text(),
                tool_name=names.get(result.tool_use_id),
                is_error=result.is_error,
            )
        return self._record(events, round_)

    def _continue_prefill(self, appended: str) -> None:
        self.built = continued_prefill(self.built, appended)

    def _result(self, stop: str, error: str | None, terminated: str | None = None) -> ReplyResult:
        options = self.request.options
        return ReplyResult(
            blocks=tuple(self.blocks),
            text="".join(b.content or "" for b in self.blocks if b.type == "text"),
            stop_reason=stop,
            usage=self.usage,
            tool_rounds=self.tool_rounds,
            messages=tuple(
                conversation(self.blocks, options.assistant_participant, options.human_participant)
            ),
            error=error,
            terminated=terminated,
        )


def runnable_calls(blocks: Sequence[Block]) -> list[ToolCall]:
    """The round's tool calls that can run. A call with no name (stray text kept
    as a nameless call, or a model that left the name out) names no tool and
    cannot be sent back: it is not run, and logged."""
    calls: list[ToolCall] = []
    for block in blocks:
        if block.type != "tool_call":
            continue
        if not block.tool_name or not block.tool_id:
            if block.content is None or block.tool_id:  # stray text was logged when found
                _log.warning("tool call with no name not run (id %r)", block.tool_id)
            continue
        calls.append(ToolCall(block.tool_id, block.tool_name, dict(block.input or {})))
    return calls

"""One ``Membrane.stream`` call: the provider calls of a reply and its tool loop.

``ReplyLoop.items()`` makes a call (``provider_call``: retried while nothing
has arrived), has its output read into events (``reply_reader``), and decides
what comes next: the end, a resume after a false stop (prefill: the stop
sequence written back), or a round of tool calls, written back into the
request (``reply_messages``), and another call.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Literal, Protocol

from ..formats import Formatter
from ..formats.base import BuiltRequest
from ..parse.json_tools import JsonToolInterceptor
from ..parse.policy import StreamPolicy
from ..providers.base import Provider
from ..vendors.errors import ProviderError
from ..vendors.retry import RetryPolicy
from ..vocab.events import Block, Event
from ..vocab.messages import Request, ToolResultContent
from ..vocab.provider_output import ProviderOutput, StopInfo, clean_output
from .images import ImageStore, ImageTool, result_text, stored_output, tool_arguments
from .provider_call import CallRound, ProviderCall
from .reply import MembraneItem, ReplyError, ReplyResult
from .reply_messages import continued_prefill, conversation, with_chat_results, with_native_results
from .reply_reader import ReplyReader
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
    """The state of one reply across its calls: the request it continues, what
    it has read (``reader``) and how many tool rounds ran."""

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
        self.mode: Literal["prefill", "chat"] = built.mode
        self.reader = ReplyReader(membrane, formatter, request, built, policies)
        self.tool_rounds = 0

    async def items(self) -> AsyncGenerator[MembraneItem, None]:
        reader = self.reader
        resumes = 0
        while True:
            if reader.terminated is not None:  # (while a tool round was fed)
                yield self._result("policy", None, terminated=reader.terminated)
                return
            round_ = CallRound()
            provider_call = ProviderCall(
                self.m, self.built, self.request.config, self.mode, self._take, self._ended
            )
            async with aclosing(provider_call.run(round_)) as call_items:
                async for item in call_items:
                    yield item
            reader.count_usage(round_)
            if reader.terminated is not None:
                yield self._result("policy", None, terminated=reader.terminated)
                return
            if round_.error is not None:
                for event in reader.flush(round_):
                    yield event
                error = round_.error
                yield ReplyError(
                    error.kind, str(error), error.provider, error.status, round_.produced
                )
                yield self._result("error", str(error))
                return
            stop = round_.stop or StopInfo("end_turn")
            # Prefill: the stop sequence that ended the call, written back if it belongs.
            prefill = self.mode == "prefill" and reader.parser is not None
            if prefill and self._stopped_after_calls(round_, stop):
                round_.written_back = FUNCTION_CALLS_END
                for event in reader.feed_text(FUNCTION_CALLS_END, round_):
                    yield event
            elif prefill and stop.reason == "stop_sequence" and stop.stop_sequence:
                assert reader.parser is not None
                if stop.stop_sequence == FUNCTION_CALLS_END and reader.parser.inside_hidden:
                    round_.written_back = stop.stop_sequence
                    for event in reader.feed_text(stop.stop_sequence, round_):
                        yield event
                elif reader.parser.inside_hidden and resumes < MAX_RESUMES and round_.produced:
                    # A false positive inside thinking or a call: put it back, go on.
                    resumes += 1
                    round_.written_back = stop.stop_sequence
                    for event in reader.feed_text(stop.stop_sequence, round_):
                        yield event
                    self.built = continued_prefill(
                        self.built, "".join(round_.raw) + round_.written_back
                    )
                    continue
            for event in reader.settle(round_):
                yield event
            calls = runnable_calls(round_.blocks)
            if not any(map(self._can_run, calls)) or self.tool_rounds >= self.m.max_tool_depth:
                for event in reader.flush(round_):
                    yield event
                yield self._result(stop.reason, None)
                return
            self.tool_rounds += 1
            answered: dict[str, ToolResultContent] = {}
            for call in calls:
                if self._is_image_call(call) and call.id not in reader.rejected:
                    async with aclosing(self._generate_image(call, round_, answered)) as made:
                        async for item in made:
                            yield item
            results = await self._run_calls(
                [call for call in calls if call.id not in answered], self.on_tool_calls
            )
            ran = iter(results)
            results = [answered[call.id] if call.id in answered else next(ran) for call in calls]
            for event in self._write_back(calls, results, round_):
                yield event
            resumes = 0

    def _stopped_after_calls(self, round_: CallRound, stop: StopInfo) -> bool:
        """Prefill: the call ended right after a tool call, inside ``<function_calls>``.
        Some servers honour the ``</function_calls>`` stop without naming it (OpenAI
        Completions says only "stop"), so the parser's state decides, not the name."""
        parser = self.reader.parser
        assert parser is not None
        if stop.reason == "max_tokens" or not parser.inside_hidden or not round_.blocks:
            return False
        named = stop.stop_sequence
        return round_.blocks[-1].type == "tool_call" and named in (None, FUNCTION_CALLS_END)

    async def _take(self, output: ProviderOutput, round_: CallRound) -> list[MembraneItem]:
        """One output of the provider, on its way to the reader."""
        output = clean_output(output)  # where model text enters: no lone surrogates
        output = await stored_output(output, self.m.image_store)
        if self.on_output is not None:
            self.on_output(output)
        return self.reader.take(output, round_)

    def _ended(self) -> bool:
        return self.reader.terminated is not None

    # ------------------------------------------------------------ tools

    def _is_image_call(self, call: ToolCall) -> bool:
        tool = self.m.image_tool
        return tool is not None and call.name == tool.name

    def _can_run(self, call: ToolCall) -> bool:
        return self.on_tool_calls is not None or self._is_image_call(call)

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
        reader = self.reader
        reader.native_follows()
        before = len(reader.blocks)
        error: str | None = None
        try:
            async with aclosing(tool.generator.generate(prompt, size=size, quality=quality)) as out:
                async for output in out:
                    output = await stored_output(clean_output(output), self.m.image_store)
                    for item in reader.take(output, round_):
                        yield item
        except ProviderError as exc:
            error = str(exc)
        for event in reader.flush_native(round_):
            yield event
        reader.text_follows()
        images = [b.image for b in reader.blocks[before:] if b.type == "image"]
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
        rejected = self.reader.rejected
        allowed = [call for call in calls if call.id not in rejected]
        if allowed and handler is None:  # only image calls could run this round
            return [
                ToolResultContent(
                    tool_use_id=call.id,
                    content=f"not run: {rejected.get(call.id, 'no handler for this tool')}",
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
                content=f"not run: {rejected[call.id]}",
                is_error=True,
            )
            if call.id in rejected
            else next(ran)
            for call in calls
        ]

    def _write_back(
        self, calls: list[ToolCall], results: list[ToolResultContent], round_: CallRound
    ) -> list[Event]:
        """The round's results as events, and the request that continues after them."""
        reader = self.reader
        names = {call.id: call.name for call in calls}
        if self.mode == "prefill" and round_.native_calls:
            events = reader.result_blocks(names, results, round_)
            assert reader.parser is not None
            reader.text_follows()
            self.built = with_native_results(
                self.built, "".join(round_.raw), round_.native_calls, results
            )
            return events
        if self.mode == "prefill":
            text = self.fmt.format_tool_results(results)
            events = reader.feed_text(text, round_)
            self.built = continued_prefill(
                self.built, "".join(round_.raw) + round_.written_back + text
            )
            return events
        events = reader.result_blocks(names, results, round_)
        self.request = with_chat_results(self.request, round_.blocks, results)
        self.built = self.fmt.build(self.request)
        return events

    def _result(self, stop: str, error: str | None, terminated: str | None = None) -> ReplyResult:
        options = self.request.options
        blocks = self.reader.blocks
        return ReplyResult(
            blocks=tuple(blocks),
            text="".join(b.content or "" for b in blocks if b.type == "text"),
            stop_reason=stop,
            usage=self.reader.usage,
            tool_rounds=self.tool_rounds,
            messages=tuple(
                conversation(blocks, options.assistant_participant, options.human_participant)
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

"""One ``Membrane.stream`` call: the provider calls of a reply and its tool loop.

``ReplyLoop.items()`` makes a call (``provider_call``: retried while nothing
has arrived), has its output read into events (``reply_reader``), and decides
what comes next: the end, a resume after a false stop (prefill: the stop
sequence written back), or a round of tool calls (``tool_round``) written back
into the request (``reply_messages``) and another call.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Literal, Protocol

from ..formats import Formatter
from ..formats.base import BuiltRequest
from ..parse.json_tools import JsonToolInterceptor
from ..parse.policy import StreamPolicy
from ..providers.base import Provider
from ..vendors.retry import RetryPolicy
from ..vocab.events import Event
from ..vocab.messages import Request, ToolResultContent
from ..vocab.provider_output import NativeImage, ProviderOutput, StopInfo, clean_output
from .images import ImageStore, ImageTool, stored_output
from .provider_call import CallRound, ProviderCall
from .reply import MembraneItem, ReplyError, ReplyResult
from .reply_messages import continued_prefill, conversation, with_chat_results, with_native_results
from .reply_reader import ReplyReader
from .tool_limits import ResultBudget
from .tool_round import ToolRound, is_image_call, runnable_calls
from .tools import OnToolCalls, ToolCall

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
    stall_timeout_s: float | None
    parse_ns: int
    json_tools: Callable[[], JsonToolInterceptor] | None
    image_tool: ImageTool | None
    image_store: ImageStore | None
    max_tool_result_chars: int
    max_reply_tool_result_chars: int


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
        # What the reply's tool results may hold, over all its rounds (tool_limits.py).
        self.budget = ResultBudget(
            membrane.max_tool_result_chars, membrane.max_reply_tool_result_chars
        )

    async def items(self) -> AsyncGenerator[MembraneItem, None]:
        reader = self.reader
        resumes = 0
        while True:
            if reader.terminated is not None:  # (while a tool round was fed)
                yield self._result("policy", None, terminated=reader.terminated)
                return
            round_ = CallRound()
            ended = self._ended if reader.policies else None
            provider_call = ProviderCall(
                self.m, self.built, self.request.config, self.mode, self._arrived, self._take, ended
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
            tools = ToolRound(self.m, reader, calls, self.on_tool_calls, self.budget)
            async with aclosing(tools.run(round_)) as tool_items:
                async for item in tool_items:
                    yield item
            for event in self._write_back(calls, tools.results, round_):
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

    def _arrived(self, output: ProviderOutput) -> ProviderOutput:
        """One output of the provider, as it comes (``on_output`` times it)."""
        output = clean_output(output)  # where model text enters: no lone surrogates
        if self.on_output is not None:
            self.on_output(output)
        return output

    async def _take(self, output: ProviderOutput, round_: CallRound) -> Sequence[MembraneItem]:
        """Output of the provider (ready deltas joined: ``call_stream``) to the reader."""
        if isinstance(output, NativeImage):  # only an image may wait on the store
            output = await stored_output(output, self.m.image_store)
        return self.reader.take(output, round_)

    def _ended(self) -> bool:
        return self.reader.terminated is not None

    def _can_run(self, call: ToolCall) -> bool:
        return self.on_tool_calls is not None or is_image_call(call, self.m.image_tool)

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
            text = self.fmt.format_tool_results(results, self.request)
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

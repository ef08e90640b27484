"""Reading a reply's output into events, and keeping what it has read.

``ReplyReader`` takes provider output — raw text through the XML parser,
native blocks through ``NativeBlockAssembler``, one index sequence for both —
passes the events through the JSON tool reader, the secret filter (no key in
any event: ``parse/secret_filter.py``) and the stream policies, and
keeps the reply's completed blocks, its usage and the tool calls a policy
rejected. It is the reply's reading state alone: when to call the provider and
what to do after a call are the reply loop's (``reply_loop``), so the two can be
read apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from ..formats import Formatter
from ..formats.base import BuiltRequest
from ..parse import NativeBlockAssembler, XmlStreamParser
from ..parse.json_tools import JsonToolInterceptor, JsonToolsInText
from ..parse.policy import PolicyRunners, StreamPolicy
from ..parse.secret_filter import SecretFilter
from ..vocab.events import Block, BlockComplete, BlockStart, Event
from ..vocab.messages import Request, ToolResultContent, ToolUseContent
from ..vocab.provider_output import (
    NativeDelta,
    NativeImage,
    NativeStart,
    ProviderOutput,
    StopInfo,
    TextDelta,
    Usage,
)
from .provider_call import CallRound
from .reply import ImagePreview, MembraneItem, UsageUpdate


class ReaderSettings(Protocol):
    """What reading takes from the membrane (a ``ReplySettings`` is one):
    ``parse_ns`` adds up the time spent parsing."""

    parse_ns: int
    json_tools: Callable[[], JsonToolInterceptor] | None


class ReplyReader:
    """The reading state of one reply across its calls."""

    def __init__(
        self,
        settings: ReaderSettings,
        formatter: Formatter,
        request: Request,
        built: BuiltRequest,
        policies: Sequence[StreamPolicy],
    ) -> None:
        self.settings = settings
        self.policies = PolicyRunners(list(policies))
        self.rejected: dict[str, str] = {}  # tool id → why a policy rejected the call
        self.parser: XmlStreamParser | None = None
        if built.mode == "prefill":
            # Seeded with the open assistant turn only: what earlier turns and other
            # participants wrote never changes how the reply is read.
            self.parser = formatter.create_parser(built.open_turn) or XmlStreamParser(
                built.open_turn
            )
            self.parser.reserve_ids(_tool_use_ids(request))
        self.assembler = NativeBlockAssembler()
        self.json_tools: JsonToolsInText | None = None
        if settings.json_tools is not None:
            interceptor = settings.json_tools()
            interceptor.reserve_ids(_tool_use_ids(request))
            self.json_tools = JsonToolsInText(interceptor)
        self.secrets = SecretFilter()  # always: not a policy one may leave out
        self.blocks: list[Block] = []
        self.usage = Usage()  # over the reply's ended calls
        self._image_index: int | None = None  # the last image block started (as emitted)

    @property
    def terminated(self) -> str | None:
        """Why a policy ended the reply, if one did."""
        return self.policies.terminated

    def count_usage(self, round_: CallRound) -> None:
        """The call ended: its usage joins the reply's."""
        self.usage = self.usage + round_.usage

    def take(self, output: ProviderOutput, round_: CallRound) -> Sequence[MembraneItem]:
        if isinstance(output, NativeDelta):  # (the most of a chat reply's outputs)
            round_.produced = True
            started = time.perf_counter_ns()
            chunks = self.assembler.delta(output.text)
            self.settings.parse_ns += time.perf_counter_ns() - started
            return self.record(chunks, round_)
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
            items: list[MembraneItem] = list(self.record(opened, round_))
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
            return self.feed_text(output.text, round_)
        events: list[Event] = []
        if self.parser is not None and isinstance(output, NativeStart):
            # A native block beside prefill text (native tools in a prefill format):
            # the text so far ends here, and the indices run on from it.
            events = self.parser.flush()
            self.assembler.skip_to(self.parser.next_block_index)
        started = time.perf_counter_ns()
        events += self.assembler.feed(output)
        self.settings.parse_ns += time.perf_counter_ns() - started
        if self.parser is not None:
            round_.native_calls += [  # (a nameless call is stray text, never run)
                e.block
                for e in events
                if isinstance(e, BlockComplete)
                and e.block.type == "tool_call"
                and e.block.tool_name
            ]
        return self.record(events, round_)

    def feed_text(self, text: str, round_: CallRound) -> list[Event]:
        assert self.parser is not None
        started = time.perf_counter_ns()
        events = self.parser.feed(text)
        self.settings.parse_ns += time.perf_counter_ns() - started
        return self.record(events, round_)

    def record(self, events: list[Event], round_: CallRound, *, last: bool = False) -> list[Event]:
        """Events through the JSON tool reader, the secret filter and the policies,
        then what passed kept as the reply's (``last``: the call's stream ended)."""
        if self.json_tools is not None:
            events = self.json_tools.feed(events)
        events = self.secrets.feed(events)
        if last:
            events += self.secrets.flush()
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

    def flush(self, round_: CallRound) -> list[Event]:
        events = self.parser.flush() if self.parser is not None else []
        self.native_follows()  # held stray text comes after the parser's blocks
        events += self.assembler.flush()
        return self.record(events, round_, last=True) + self.settle(round_)

    def native_follows(self) -> None:
        """Native blocks read next are numbered after the text's."""
        if self.parser is not None:
            self.assembler.skip_to(self.parser.next_block_index)

    def text_follows(self) -> None:
        """Text read next is numbered after the native blocks."""
        if self.parser is not None:
            self.parser.skip_to(self.assembler.next_block_index)

    def flush_native(self, round_: CallRound) -> list[Event]:
        """The native blocks still open, ended and kept."""
        return self.record(self.assembler.flush(), round_)

    def result_blocks(
        self, names: dict[str, str], results: list[ToolResultContent], round_: CallRound
    ) -> list[Event]:
        """A tool round's results as ``tool_result`` blocks, after what is open."""
        events = self.assembler.flush()
        for result in results:
            events += self.assembler.tool_result(
                result.tool_use_id,
                result.text(),
                tool_name=names.get(result.tool_use_id),
                is_error=result.is_error,
            )
        return self.record(events, round_)

    # ------------------------------------------------------------ policies

    def settle(self, round_: CallRound) -> list[Event]:
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


def _tool_use_ids(request: Request) -> Iterator[str]:
    """The tool-use ids already in the conversation: generated ids skip them."""
    return (
        block.id
        for message in request.messages
        for block in message.content
        if isinstance(block, ToolUseContent)
    )

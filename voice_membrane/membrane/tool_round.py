"""One round of a reply's tool calls: which calls run, and running them.

``runnable_calls`` picks the calls of a provider call that can run. A
``ToolRound`` runs them: image tool calls generate their image within the reply
(its block flows out through the reader), the rest go to ``on_tool_calls``,
and a call a policy rejected is answered with why, never run. Its ``results``
(one per call, in order, each cut to the reply's ``ResultBudget``) are what the
reply loop writes back; how they are
written back (``reply_messages``) and when a round happens are not its job.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import Protocol

from ..vendors.errors import ProviderError
from ..vocab.events import Block
from ..vocab.messages import ToolResultContent
from ..vocab.provider_output import clean_output
from .images import ImageStore, ImageTool, result_text, stored_output, tool_arguments
from .provider_call import CallRound
from .reply import MembraneItem
from .reply_reader import ReplyReader
from .tool_limits import ResultBudget
from .tools import OnToolCalls, ToolCall, run_tool_calls

_log = logging.getLogger(__name__)


class ToolSettings(Protocol):
    """What a tool round runs with (a ``ReplySettings`` is one)."""

    tool_timeout_s: float
    image_tool: ImageTool | None
    image_store: ImageStore | None


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


def is_image_call(call: ToolCall, tool: ImageTool | None) -> bool:
    return tool is not None and call.name == tool.name


class ToolRound:
    """The calls of one round, run by ``run``; then ``results`` holds one
    result per call, in the calls' order."""

    def __init__(
        self,
        settings: ToolSettings,
        reader: ReplyReader,
        calls: list[ToolCall],
        handler: OnToolCalls | None,
        budget: ResultBudget | None = None,
    ) -> None:
        self.settings, self.reader, self.calls, self.handler = settings, reader, calls, handler
        self.budget = budget if budget is not None else ResultBudget()  # the reply's
        self.results: list[ToolResultContent] = []

    async def run(self, round_: CallRound) -> AsyncGenerator[MembraneItem, None]:
        """Image calls first, their image blocks yielded as they come; then the
        other calls, all at once through the handler."""
        answered: dict[str, ToolResultContent] = {}
        for call in self.calls:
            if (
                is_image_call(call, self.settings.image_tool)
                and call.id not in self.reader.rejected
            ):
                async with aclosing(self._generate_image(call, round_, answered)) as made:
                    async for item in made:
                        yield item
        ran = iter(await self._run_calls([call for call in self.calls if call.id not in answered]))
        # Cut to the reply's limits before anything keeps them (tool_limits.py).
        self.results = self.budget.cap(
            [answered[call.id] if call.id in answered else next(ran) for call in self.calls]
        )

    async def _generate_image(
        self, call: ToolCall, round_: CallRound, answered: dict[str, ToolResultContent]
    ) -> AsyncGenerator[MembraneItem, None]:
        """Run the image tool's generator for ``call``: its image block flows out
        (partial images as ``ImagePreview``), its result is put in ``answered``.
        A failure is the call's error result, never the reply's end."""
        tool = self.settings.image_tool
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
                    output = await stored_output(clean_output(output), self.settings.image_store)
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

    async def _run_calls(self, calls: list[ToolCall]) -> list[ToolResultContent]:
        """``calls`` through the handler, a rejected one answered with why."""
        rejected, handler = self.reader.rejected, self.handler
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
            await run_tool_calls(allowed, handler, self.settings.tool_timeout_s)
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

"""Running tool calls for the tool loop.

``Membrane`` hands the calls of one reply round to ``on_tool_calls`` and waits
at most ``tool_timeout_s``. A handler that raises or runs out of time does not
end the reply: each call it left unanswered gets an error result saying what
happened, and the model sees it. ``tool_handler`` builds an ``on_tool_calls``
from plain functions, running the calls concurrently, each with its own errors.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeAlias

import anyio

from .messages import ToolResultContent


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]


ToolOutput: TypeAlias = ToolResultContent | str
OnToolCalls: TypeAlias = Callable[[list[ToolCall]], Awaitable[Sequence[ToolOutput]]]
ToolFunction: TypeAlias = Callable[..., Any]  # sync (run in a thread) or async; input as kwargs


async def run_tool_calls(
    calls: list[ToolCall], handler: OnToolCalls, timeout_s: float
) -> list[ToolResultContent]:
    """One result per call, in order; errors and timeouts become error results."""
    outputs: Sequence[ToolOutput] = ()
    failure: str | None = None
    try:
        with anyio.fail_after(timeout_s):
            outputs = await handler(calls)
    except TimeoutError:
        failure = f"tool call timed out after {timeout_s:g} s"
    except Exception as exc:  # a tool's failure is the model's business, not a crash
        failure = f"tool call failed: {type(exc).__name__}: {exc}"
    results: list[ToolResultContent] = []
    for n, call in enumerate(calls):
        output = outputs[n] if n < len(outputs) else None
        if isinstance(output, ToolResultContent):
            results.append(output.model_copy(update={"tool_use_id": call.id}))
        elif isinstance(output, str):
            results.append(ToolResultContent(tool_use_id=call.id, content=output))
        else:
            message = failure or "the tool handler returned no result for this call"
            results.append(ToolResultContent(tool_use_id=call.id, content=message, is_error=True))
    return results


def tool_handler(functions: Mapping[str, ToolFunction], *, timeout_s: float = 30.0) -> OnToolCalls:
    """An ``on_tool_calls`` that calls ``functions[call.name](**call.input)`` for each
    call concurrently. Each call has its own timeout and error result; a return
    value that is not a string is sent as JSON."""

    async def run_one(call: ToolCall) -> ToolResultContent:
        function = functions.get(call.name)
        if function is None:
            return _error(call, f"unknown tool {call.name!r}")
        try:
            with anyio.fail_after(timeout_s):
                if inspect.iscoroutinefunction(function):
                    value = await function(**call.input)
                else:  # a blocking function must not stall the stream; a thread can time out
                    value = await anyio.to_thread.run_sync(
                        partial(function, **call.input), abandon_on_cancel=True
                    )
        except TimeoutError:
            return _error(call, f"tool {call.name!r} timed out after {timeout_s:g} s")
        except Exception as exc:
            return _error(call, f"tool {call.name!r} failed: {type(exc).__name__}: {exc}")
        content = value if isinstance(value, str) else json.dumps(value)
        return ToolResultContent(tool_use_id=call.id, content=content)

    async def handler(calls: list[ToolCall]) -> Sequence[ToolOutput]:
        results: list[ToolOutput] = [""] * len(calls)

        async def fill(n: int, call: ToolCall) -> None:
            results[n] = await run_one(call)

        async with anyio.create_task_group() as group:
            for n, call in enumerate(calls):
                group.start_soon(fill, n, call)
        return results

    return handler


def _error(call: ToolCall, message: str) -> ToolResultContent:
    return ToolResultContent(tool_use_id=call.id, content=message, is_error=True)

"""Running tool calls for the tool loop.

``Membrane`` hands the calls of one reply round to ``on_tool_calls`` and waits
at most ``tool_timeout_s``. A handler that raises or runs out of time does not
end the reply: each call it left unanswered gets an error result saying what
happened, and the model sees it. ``tool_handler`` builds an ``on_tool_calls``
from plain functions, running the calls concurrently, each with its own errors.
A ``Toolbox`` (``tools_mcp.McpToolbox``) is tools that live for a session: opened
with it, listing its ``definitions``, running calls; ``by_name`` joins handlers.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any, Protocol, Self, TypeAlias

import anyio

from ..vocab.messages import ToolDefinition, ToolResultContent


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]


ToolOutput: TypeAlias = ToolResultContent | str
OnToolCalls: TypeAlias = Callable[[list[ToolCall]], Awaitable[Sequence[ToolOutput]]]
ToolFunction: TypeAlias = Callable[..., Any]  # sync (run in a thread) or async; input as kwargs


class Toolbox(Protocol):
    """Tools opened and closed with a session (``async with``), whose
    ``definitions`` are known once open and whose calls it runs."""

    definitions: list[ToolDefinition]

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def __call__(self, calls: list[ToolCall]) -> Sequence[ToolOutput]: ...


def by_name(
    routes: Sequence[tuple[Collection[str], OnToolCalls]], fallback: OnToolCalls | None = None
) -> OnToolCalls:
    """One ``on_tool_calls`` over several: each call goes to the first handler
    whose names hold its name, else to ``fallback`` (without one, a call no
    handler names gets an error result).
    The handlers run concurrently; one that raises answers its own calls with
    an error result, and the others' results are kept."""

    async def handler(calls: list[ToolCall]) -> Sequence[ToolOutput]:
        results: list[ToolOutput] = [_error(call, f"unknown tool {call.name!r}") for call in calls]
        handlers = [*routes, *([((), fallback)] if fallback is not None else [])]
        groups: list[list[int]] = [[] for _ in handlers]
        for n, call in enumerate(calls):
            r = next((r for r, (names, _) in enumerate(routes) if call.name in names), None)
            if r is None and fallback is None:
                continue
            groups[len(routes) if r is None else r].append(n)
            results[n] = _error(call, "the tool handler returned no result for this call")

        async def run(group: list[int], handle: OnToolCalls) -> None:
            try:
                outputs = await handle([calls[n] for n in group])
            except Exception as exc:  # this handler's calls fail; the others' stand
                message = f"tool call failed: {type(exc).__name__}: {exc}"
                outputs = [_error(calls[n], message) for n in group]
            for n, output in zip(group, outputs, strict=False):
                results[n] = output

        async with anyio.create_task_group() as tg:
            for group, (_, handle) in zip(groups, handlers, strict=True):
                if group:
                    tg.start_soon(run, group, handle)
        return results

    return handler


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

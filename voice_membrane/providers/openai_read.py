"""Reading OpenAI responses (sans-I/O): chunks or whole objects → ``ProviderOutput``.

Chat Completions has no block framing: a reply is a run of content, reasoning
and tool-call deltas. ``ChatReader`` gives it the framing the rest of the
library expects — ``NativeStart`` / ``NativeDelta`` / ``NativeStop`` — closing
the open block whenever the kind of delta changes (reasoning → content → tool
call 0 → tool call 1…). A non-streaming message goes through the same reader,
so both give the same blocks. ``TextReader`` does the same for legacy
Completions (raw text, read by the XML parser). Both enforce stop sequences
client-side: the API takes only four, and some servers leak the matched stop.
SDK objects are read with ``getattr`` — OpenAI-compatible servers add fields
(``reasoning_content``, ``reasoning``, ``stopping_word``) the SDK keeps as extras —
and as untrusted input: the SDK builds streamed chunks without validating them,
so every field goes through ``fields`` (a value of the wrong JSON type counts as
absent and is logged, never raised).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..parse.stops import StopScanner
from ..vocab.provider_output import (
    NativeDelta,
    NativeStart,
    NativeStop,
    ProviderOutput,
    StopInfo,
    StopReason,
    TextDelta,
    Usage,
)
from . import fields

FINISH: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
REASONING_FIELDS = ("reasoning_content", "reasoning")  # DeepSeek / vLLM, OpenRouter
NAMED_STOP_FIELDS = ("stopping_word", "stop_reason")  # llama.cpp, vLLM


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def reasoning_of(obj: Any) -> str | None:
    """A delta's or message's reasoning text, in either spelling."""
    # Looked up in the pydantic model's extras and fields directly: a getattr that
    # misses raises inside pydantic, several µs on every delta.
    if isinstance(obj, dict):
        extra, attributes = obj, obj
    else:
        extra = getattr(obj, "__pydantic_extra__", None) or {}
        attributes = getattr(obj, "__dict__", {})
    for name in REASONING_FIELDS:
        value = extra.get(name) if name in extra else attributes.get(name)
        if (text := _str(value)) is not None:
            return text
    return None


def usage_of(usage: Any) -> Usage:
    details = fields.get(usage, "completion_tokens_details")
    return Usage(
        input_tokens=fields.integer(usage, "prompt_tokens", "usage") or 0,
        output_tokens=fields.integer(usage, "completion_tokens", "usage") or 0,
        thinking_tokens=fields.integer(details, "reasoning_tokens", "usage") or 0,
    )


def stop_info(finish: str | None) -> StopInfo:
    return StopInfo(FINISH.get(finish or "", "other"), raw=finish)


class ChatReader:
    """Chat Completions output → native block items. ``done`` turns true when a
    client-side stop sequence matched: the caller stops reading."""

    def __init__(self, stops: Sequence[str]) -> None:
        self._open: tuple[str, int] | None = None  # ("text" | "thinking" | "tool", index)
        self._scanner = StopScanner(stops)
        self._tool_ids: dict[int, str] = {}
        self.finish: str | None = None

    @property
    def done(self) -> bool:
        return self._scanner.stopped is not None

    def chunk(self, chunk: Any) -> list[ProviderOutput]:
        """One streamed ``ChatCompletionChunk``."""
        out: list[ProviderOutput] = []
        for choice in fields.items(chunk, "choices", "chunk")[:1]:
            delta = fields.get(choice, "delta")
            if delta is not None:
                out += self._message(delta, "delta")
            if finish := fields.text(choice, "finish_reason", "choice"):
                self.finish = finish
                out += self._close()  # the reply is complete: no need to wait for [DONE]
        if (usage := fields.get(chunk, "usage")) is not None:
            out.append(usage_of(usage))
        return out

    def completion(self, completion: Any) -> list[ProviderOutput]:
        """A whole ``ChatCompletion``: its blocks whole, then usage."""
        out: list[ProviderOutput] = []
        for choice in fields.items(completion, "choices", "completion")[:1]:
            out += self._message(fields.get(choice, "message"), "message", whole=True)
            self.finish = fields.text(choice, "finish_reason", "choice")
            out += self._close()
        if (usage := fields.get(completion, "usage")) is not None:
            out.append(usage_of(usage))
        return out

    def _message(self, message: Any, where: str, *, whole: bool = False) -> list[ProviderOutput]:
        """A streamed delta, or a whole message (its calls indexed in order)."""
        out = self.reasoning(reasoning_of(message))
        content = _str(fields.text(message, "content", where))
        out += self.content(content or _str(fields.text(message, "refusal", where)))
        for n, call in enumerate(fields.items(message, "tool_calls", where)):
            function = fields.get(call, "function")
            out += self.tool(
                n if whole else self._tool_index(call),
                fields.text(call, "id", "tool_call"),
                fields.text(function, "name", "tool_call.function"),
                fields.text(function, "arguments", "tool_call.function"),
            )
        return out

    def reasoning(self, text: str | None) -> list[ProviderOutput]:
        if not text or self.done:
            return []
        out = self._switch(("thinking", 0))
        out.append(NativeDelta(text))
        return out

    def content(self, text: str | None) -> list[ProviderOutput]:
        if not text or self.done:
            return []
        out = self._switch(("text", 0))
        if safe := self._scanner.feed(text):
            out.append(NativeDelta(safe))
        return out

    def tool(
        self, index: int, tool_id: str | None, name: str | None, arguments: str | None
    ) -> list[ProviderOutput]:
        if self.done:
            return []
        out: list[ProviderOutput] = []
        if self._open != ("tool", index):
            out = self._close()
            self._open = ("tool", index)
            tool_id = self._tool_ids.setdefault(index, tool_id or f"call_{index}")
            out.append(NativeStart("tool_call", tool_id=tool_id, tool_name=name or ""))
        if arguments:
            out.append(NativeDelta(arguments))
        return out

    def end(self) -> list[ProviderOutput]:
        """The stream ended (or a stop sequence matched): close the open block and
        say why it ended."""
        out = self._close()
        stopped = self._scanner.stopped
        if stopped is not None:
            out.append(StopInfo("stop_sequence", stop_sequence=stopped, raw=self.finish))
        else:
            out.append(stop_info(self.finish))
        return out

    def _tool_index(self, call: Any) -> int:
        """The call's index; servers that leave it out continue the open call
        until a new id arrives."""
        index = fields.get(call, "index")
        if isinstance(index, int):
            return index
        if self._open is not None and self._open[0] == "tool" and not fields.get(call, "id"):
            return self._open[1]
        return len(self._tool_ids)

    def _switch(self, kind: tuple[str, int]) -> list[ProviderOutput]:
        if self._open == kind:
            return []
        out = self._close()
        self._open = kind
        out.append(NativeStart("text" if kind[0] == "text" else "thinking"))
        return out

    def _close(self) -> list[ProviderOutput]:
        out: list[ProviderOutput] = []
        if self._open is None:
            return out
        if self._open[0] == "text" and (held := self._scanner.flush()):
            out.append(NativeDelta(held))
        out.append(NativeStop())
        self._open = None
        return out


class TextReader:
    """Legacy Completions text → ``TextDelta`` items, cut at the first stop
    sequence (or ``end_of_turn``) the scanner finds, leaked or not."""

    def __init__(self, stops: Sequence[str], end_of_turn: str | None = None) -> None:
        self._stops = list(stops)
        self._end_of_turn = end_of_turn
        self._scanner = StopScanner([*stops, end_of_turn] if end_of_turn else stops)
        self.finish: str | None = None
        self._named: str | None = None  # a stop the server says it matched

    @property
    def done(self) -> bool:
        return self._scanner.stopped is not None

    def chunk(self, chunk: Any) -> list[ProviderOutput]:
        """One streamed ``Completion`` chunk (or a whole ``Completion``)."""
        out: list[ProviderOutput] = []
        for choice in fields.items(chunk, "choices", "chunk")[:1]:
            out += self.text(_str(fields.text(choice, "text", "choice")))
            self.finish = fields.text(choice, "finish_reason", "choice") or self.finish
            for obj in (choice, chunk):
                for name in NAMED_STOP_FIELDS:
                    self._named = _str(fields.get(obj, name)) or self._named
        if (usage := fields.get(chunk, "usage")) is not None:
            out.append(usage_of(usage))
        return out

    def text(self, text: str | None) -> list[ProviderOutput]:
        if not text or self.done:
            return []
        safe = self._scanner.feed(text)
        return [TextDelta(safe)] if safe else []

    def end(self) -> list[ProviderOutput]:
        out: list[ProviderOutput] = []
        if held := self._scanner.flush():
            out.append(TextDelta(held))
        stop = self._scanner.stopped
        if stop is None and self.finish == "stop" and self._named in self._stops:
            stop = self._named
        if stop is not None and stop == self._end_of_turn and stop not in self._stops:
            out.append(StopInfo("end_turn", raw=self.finish))
        elif stop is not None:
            out.append(StopInfo("stop_sequence", stop_sequence=stop, raw=self.finish))
        else:
            out.append(stop_info(self.finish))
        return out

"""Gemini response chunks → provider outputs (the reading half of the adapter).

Gemini sends parts, not blocks: consecutive parts of one kind form a block, and
a change of kind closes the open one. See ``providers.gemini`` for the mapping.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..parse.stops import StopScanner
from .base import (
    NativeDelta,
    NativeStart,
    NativeStop,
    ProviderError,
    ProviderOutput,
    StopInfo,
    StopReason,
    TextDelta,
    Usage,
)
from .gemini_request import signature_text

NAME = "gemini"
REFUSALS = {
    "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
    "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR",
}  # fmt: skip


class ChunkReader:
    """Response chunks → provider outputs, keeping the open block's state."""

    def __init__(
        self, prefill: bool, stops: list[str], end_of_turn: str | None, ids: Iterator[int]
    ) -> None:
        self.prefill, self.end_of_turn, self.ids = prefill, end_of_turn, ids
        self.scanner = StopScanner(stops) if stops else None
        self.open: str | None = None  # "text" | "thinking"
        self.signature: str | None = None  # the open thinking block's signature
        self.calls = 0
        self.usage: Usage | None = None
        self.finish: str | None = None
        self.blocked: str | None = None  # the prompt was blocked (promptFeedback)
        self.done = False  # a client-side stop was found: read no further

    def read(self, response: Any) -> list[ProviderOutput]:
        if response.usage_metadata is not None:
            self.usage = usage_of(response.usage_metadata)
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason:
            self.blocked = _word(feedback.block_reason)
        out: list[ProviderOutput] = []
        if not response.candidates:
            return out
        candidate = response.candidates[0]
        content = candidate.content
        for part in (content.parts if content is not None else None) or []:
            out += self._part(part)
            if self.done:
                return out
        if candidate.finish_reason:
            self.finish = _word(candidate.finish_reason)
        return out

    def end(self, complete: bool) -> list[ProviderOutput]:
        """The last items: the open block closed, usage, why the reply ended."""
        if not complete and self.blocked is None:
            raise ProviderError(NAME, "connection", "the stream ended without a finishReason")
        out = self._close()
        if self.usage is not None:
            out.append(self.usage)
        out.append(self._stop_info())
        return out

    def _stop_info(self) -> StopInfo:
        if self.done and self.scanner is not None and self.scanner.stopped is not None:
            stop = self.scanner.stopped
            if stop == self.end_of_turn:
                return StopInfo("end_turn", raw=stop)
            return StopInfo("stop_sequence", stop)
        if self.finish is None and self.blocked is not None:
            return StopInfo("refusal", raw=self.blocked)
        reason: StopReason = "other"
        if self.finish == "STOP":
            reason = "tool_use" if self.calls else "end_turn"
        elif self.finish == "MAX_TOKENS":
            reason = "max_tokens"
        elif self.finish == "CONTINUATION":  # more is available: the turn paused
            reason = "pause_turn"
        elif self.finish in REFUSALS:
            reason = "refusal"
        return StopInfo(reason, raw=self.finish)

    def _part(self, part: Any) -> list[ProviderOutput]:
        signature = signature_text(part.thought_signature)
        out: list[ProviderOutput] = []
        if part.function_call is not None:
            out += self._close()
            call = part.function_call
            self.calls += 1
            tool_id = call.id or f"gemini_call_{next(self.ids)}"
            args = dict(call.args or {})
            out.append(NativeStart("tool_call", tool_id, call.name or ""))
            out += [NativeDelta(json.dumps(args)), NativeStop(input=args, signature=signature)]
            return out
        if part.thought:
            if self.open != "thinking":
                out += self._open("thinking")
            self.signature = signature or self.signature
            if part.text:
                out.append(TextDelta(part.text) if self.prefill else NativeDelta(part.text))
            return out
        if part.text is None:
            return out  # inline data, code execution…: not part of a spoken reply
        if self.open == "thinking":
            self.signature = self.signature or signature  # Gemini signs the part after thoughts
            out += self._close()
        if self.open != "text":
            out += self._open("text")
        text = part.text
        if self.scanner is not None:
            text = self.scanner.feed(text)
            self.done = self.scanner.stopped is not None
        if text:
            out.append(TextDelta(text) if self.prefill else NativeDelta(text))
        if self.done:
            out += self._close()
        return out

    def _open(self, kind: str) -> list[ProviderOutput]:
        out = self._close()
        self.open = kind
        if kind == "thinking":
            out.append(TextDelta("<thinking>") if self.prefill else NativeStart("thinking"))
        elif not self.prefill:
            out.append(NativeStart("text"))
        return out

    def _close(self) -> list[ProviderOutput]:
        out: list[ProviderOutput] = []
        if self.open == "text":
            held = self.scanner.flush() if self.scanner is not None else ""
            if held:
                out.append(TextDelta(held) if self.prefill else NativeDelta(held))
            if not self.prefill:
                out.append(NativeStop())
        elif self.open == "thinking":
            stop = NativeStop(signature=self.signature)
            out.append(TextDelta("</thinking>") if self.prefill else stop)
        self.open, self.signature = None, None
        return out


def _word(value: Any) -> str:
    """An SDK enum (or an unknown value kept as a string) as the API's word."""
    return str(getattr(value, "value", value))


def usage_of(usage: Any) -> Usage:
    def count(name: str) -> int:
        value = getattr(usage, name, None)
        return value if isinstance(value, int) else 0

    return Usage(
        input_tokens=count("prompt_token_count"),  # includes cached tokens
        output_tokens=count("candidates_token_count"),
        cache_read_input_tokens=count("cached_content_token_count"),
        thinking_tokens=count("thoughts_token_count"),
    )

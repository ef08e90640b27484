"""Gemini response chunks → provider outputs (the reading half of the adapter).

Gemini sends parts, not blocks: consecutive parts of one kind form a block, and
a change of kind closes the open one. See ``providers.gemini`` for the mapping.
The SDK validates each chunk (one that does not fit its schema fails as a
``stream`` error); fields are still read through ``fields``, as untrusted input.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

from ..parse.stops import StopScanner
from ..vendors.errors import ProviderError
from ..vocab.messages import GeneratedImageContent, GenerationInfo
from ..vocab.provider_output import (
    NativeDelta,
    NativeImage,
    NativeStart,
    NativeStop,
    ProviderOutput,
    StopInfo,
    StopReason,
    TextDelta,
    Usage,
)
from . import fields
from .gemini_request import signature_text

NAME = "gemini"
IMAGE_TYPE = re.compile(r"^image/[a-z0-9.+-]+$")
_log = logging.getLogger("voice_membrane.providers")
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
        self.model: str | None = None  # the model version that answered

    def read(self, response: Any) -> list[ProviderOutput]:
        self.model = fields.text(response, "model_version", "response") or self.model
        if (usage := fields.get(response, "usage_metadata")) is not None:
            self.usage = usage_of(usage)
        feedback = fields.get(response, "prompt_feedback")
        if block_reason := fields.get(feedback, "block_reason"):
            self.blocked = _word(block_reason)
        out: list[ProviderOutput] = []
        candidates = fields.items(response, "candidates", "response")
        if not candidates:
            return out
        candidate = candidates[0]
        for part in fields.items(fields.get(candidate, "content"), "parts", "content"):
            out += self._part(part)
            if self.done:
                return out
        if finish := fields.get(candidate, "finish_reason"):
            self.finish = _word(finish)
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
        raw_signature = fields.get(part, "thought_signature")
        signature = signature_text(raw_signature) if isinstance(raw_signature, bytes) else None
        out: list[ProviderOutput] = []
        text = fields.text(part, "text", "part")
        if (call := fields.get(part, "function_call")) is not None:
            out += self._close()
            self.calls += 1
            tool_id = fields.text(call, "id", "function_call") or f"gemini_call_{next(self.ids)}"
            args = dict(fields.mapping(call, "args", "function_call") or {})
            name = fields.text(call, "name", "function_call")
            out.append(NativeStart("tool_call", tool_id, name))
            out += [NativeDelta(json.dumps(args)), NativeStop(input=args, signature=signature)]
            return out
        if fields.get(part, "thought") is True:
            if self.open != "thinking":
                out += self._open("thinking")
            self.signature = signature or self.signature
            if text:
                out.append(TextDelta(text) if self.prefill else NativeDelta(text))
            return out
        if (inline := fields.get(part, "inline_data")) is not None:
            return out + self._image(inline)
        if text is None:
            return out  # code execution, files…: not part of a spoken reply
        if self.open == "thinking":
            self.signature = self.signature or signature  # Gemini signs the part after thoughts
            out += self._close()
        if self.open != "text":
            out += self._open("text")
        if self.scanner is not None:
            text = self.scanner.feed(text)
            self.done = self.scanner.stopped is not None
        if text:
            out.append(TextDelta(text) if self.prefill else NativeDelta(text))
        if self.done:
            out += self._close()
        return out

    def _image(self, inline: Any) -> list[ProviderOutput]:
        """An ``inline_data`` image part: an image block of its own (Gemini sends
        the whole image in one part, so there are no partial images)."""
        mime = fields.text(inline, "mime_type", "inline_data") or ""
        data = fields.get(inline, "data")
        if not IMAGE_TYPE.match(mime) or not isinstance(data, bytes) or not data:
            _log.warning("inline data that is not an image ignored (%r)", mime)
            return []
        image = GeneratedImageContent(
            data=base64.b64encode(data).decode("ascii"),
            mime_type=mime,
            generation=GenerationInfo(model=self.model),
        )
        out = self._close()
        return [*out, NativeStart("image"), NativeImage(image), NativeStop()]

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
        return fields.integer(usage, name, "usage_metadata") or 0

    return Usage(
        input_tokens=count("prompt_token_count"),  # includes cached tokens
        output_tokens=count("candidates_token_count"),
        cache_read_input_tokens=count("cached_content_token_count"),
        thinking_tokens=count("thoughts_token_count"),
    )

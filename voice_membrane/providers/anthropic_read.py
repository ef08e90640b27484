"""Reading Anthropic responses (sans-I/O): stream events or a whole message →
``ProviderOutput``.

Events are read item by item, with no accumulation in between: in prefill mode
a text block's text is raw ``TextDelta`` for the XML parser; in chat mode each
content block becomes ``NativeStart`` / ``NativeDelta`` / ``NativeStop``
(thinking is native in both modes).

Model output is untrusted input. Events are told apart by their ``type`` field,
not their class, and every field is read through ``fields`` (the SDK builds
events without validating them): an event type the reader does not know is
skipped and logged (the API adds types), a field of the wrong JSON type counts
as absent and is logged. A delta is passed on as the open block's content only
when its kind matches that block (``text_delta`` in a text block…); otherwise —
no open block, a block type the reader does not know (server tools, new
types), a mismatched kind — it is a ``StrayDelta``: kept hidden, never spoken.
"""

from __future__ import annotations

import json
from typing import Any

from ..vocab.provider_output import (
    NativeDelta,
    NativeStart,
    NativeStop,
    ProviderOutput,
    StopInfo,
    StopReason,
    StrayDelta,
    TextDelta,
    Usage,
)
from . import fields

STOP_REASONS: dict[str, StopReason] = {
    reason: reason
    for reason in ("end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal", "pause_turn")
}

# The delta kind each block type takes, and the field holding its text.
DELTA_OF_BLOCK = {
    "text": "text_delta",
    "thinking": "thinking_delta",
    "tool_use": "input_json_delta",
}
DELTA_TEXT = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
}
QUIET_DELTAS = {"signature_delta", "citations_delta"}  # no text of the block's own


class StreamReader:
    """Raw stream events → provider outputs, keeping the state of the open block."""

    def __init__(self, prefill: bool) -> None:
        self.prefill = prefill
        self.usage = Usage()
        self.block: str | None = None  # the open block's type, as the wire names it
        self.expects: str | None = None  # the delta type that block takes
        self.native = False  # the open block was announced with NativeStart
        self.signature = ""
        self.stop = StopInfo("other")
        self.stopped = False
        self._unknown: set[str] = set()  # event and delta types already logged

    def read(self, event: Any) -> list[ProviderOutput]:
        kind = fields.text(event, "type", "event")
        if kind == "content_block_delta":
            return self._delta(fields.get(event, "delta"))
        if kind == "content_block_start":
            return self._start(fields.get(event, "content_block"))
        if kind == "content_block_stop":
            return self._close()
        if kind == "message_start":
            self.usage = usage_of(fields.get(fields.get(event, "message"), "usage"))
            return [self.usage]
        if kind == "message_delta":
            self.usage = usage_of(fields.get(event, "usage"), self.usage)
            delta = fields.get(event, "delta")
            reason = fields.text(delta, "stop_reason", "message_delta.delta")
            self.stop = stop_info(reason, fields.text(delta, "stop_sequence", "message_delta"))
            return [self.usage]
        if kind == "message_stop":
            self.stopped = True
            return [*self._close(), self.stop]
        if kind != "ping":
            self._skip(f"event type {kind!r}")
        return []

    def _start(self, block: Any) -> list[ProviderOutput]:
        out = self._close()  # a start with no stop before it ends the open block
        kind = fields.text(block, "type", "content_block") or "?"
        self.block, self.expects = kind, DELTA_OF_BLOCK.get(kind)
        where = f"content_block_start.{kind}"
        if kind == "text":
            if not self.prefill:
                out.append(NativeStart("text"))
                self.native = True
            out += self._content(fields.text(block, "text", where))
        elif kind == "thinking":
            out.append(NativeStart("thinking"))
            self.native = True
            self.signature = fields.text(block, "signature", where) or ""
            out += self._content(fields.text(block, "thinking", where))
        elif kind == "redacted_thinking":
            out.append(NativeStart("thinking", redacted_data=fields.text(block, "data", where)))
            self.native = True
        elif kind == "tool_use":
            tool_id, name = fields.text(block, "id", where), fields.text(block, "name", where)
            out.append(NativeStart("tool_call", tool_id, name))
            self.native = True
            if tool_input := fields.mapping(block, "input", where):  # streamed input starts empty
                out.append(NativeDelta(json.dumps(tool_input)))
        # Other blocks (server tools and their results, types added later) are not
        # part of a spoken reply: their deltas become stray, hidden text.
        return out

    def _delta(self, delta: Any) -> list[ProviderOutput]:
        kind = fields.text(delta, "type", "content_block_delta.delta")
        if kind == "signature_delta":
            if self.block == "thinking":
                self.signature = fields.text(delta, "signature", "signature_delta") or ""
            return []
        field = DELTA_TEXT.get(kind) if kind is not None else None
        if field is None:
            if kind not in QUIET_DELTAS:
                self._skip(f"delta type {kind!r}")
            return []
        value = fields.text(delta, field, field)
        if not value:
            return []
        if kind != self.expects:
            where = f"a {self.block!r} block" if self.block is not None else "no open block"
            return [StrayDelta(value, f"{kind} in {where}")]
        return [NativeDelta(value) if self.native else TextDelta(value)]

    def _content(self, value: str | None) -> list[ProviderOutput]:
        if not value:
            return []
        return [NativeDelta(value) if self.native else TextDelta(value)]

    def _close(self) -> list[ProviderOutput]:
        out: list[ProviderOutput] = []
        if self.native:
            out.append(NativeStop(signature=self.signature or None))
        self.block, self.expects, self.native, self.signature = None, None, False, ""
        return out

    def _skip(self, what: str) -> None:
        if what not in self._unknown:
            self._unknown.add(what)
            fields.log.warning("anthropic: skipped an unknown %s", what)


def message_outputs(message: Any, prefill: bool) -> list[ProviderOutput]:
    """A whole ``Message`` as the items a stream of it would give, each block whole."""
    reader = StreamReader(prefill)
    out: list[ProviderOutput] = [usage_of(fields.get(message, "usage"))]
    for block in fields.items(message, "content", "message"):
        out += reader._start(block)
        out += reader._close()
    stop = fields.text(message, "stop_reason", "message")
    out.append(stop_info(stop, fields.text(message, "stop_sequence", "message")))
    return out


def usage_of(usage: Any, before: Usage | None = None) -> Usage:
    """``Usage`` from the SDK's usage (message_start) or cumulative delta usage
    (message_delta, whose input counts may be absent: kept from ``before``)."""
    before = before or Usage()
    details = fields.get(usage, "output_tokens_details")

    def count(obj: Any, name: str, default: int) -> int:
        value = fields.integer(obj, name, "usage")
        return value if value is not None else default

    return Usage(
        input_tokens=count(usage, "input_tokens", before.input_tokens),
        output_tokens=count(usage, "output_tokens", before.output_tokens),
        cache_creation_input_tokens=count(
            usage, "cache_creation_input_tokens", before.cache_creation_input_tokens
        ),
        cache_read_input_tokens=count(
            usage, "cache_read_input_tokens", before.cache_read_input_tokens
        ),
        thinking_tokens=count(details, "thinking_tokens", before.thinking_tokens),
    )


def stop_info(reason: str | None, stop_sequence: str | None) -> StopInfo:
    return StopInfo(STOP_REASONS.get(reason or "", "other"), stop_sequence, reason)

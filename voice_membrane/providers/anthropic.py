"""Anthropic Messages API as a ``Provider``, through the official ``anthropic`` SDK.

The SDK's raw event stream (``messages.create(stream=True)``) is mapped item by
item, with no accumulation in between, so each delta reaches the parser as soon
as it arrives: in prefill mode text is raw ``TextDelta`` for the XML parser; in
chat mode each content block becomes ``NativeStart`` / ``NativeDelta`` /
``NativeStop``. The SDK's retries are off (``Membrane`` retries), and every
failure — HTTP status, an in-stream ``error`` event, a malformed line, a dropped
connection — becomes a ``ProviderError``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import anthropic
import anyio
import httpx2
from anthropic import types as wire

from ..redact import remember
from .anthropic_request import request_params
from .base import (
    ErrorKind,
    NativeDelta,
    NativeStart,
    NativeStop,
    ProviderError,
    ProviderOutput,
    StopInfo,
    StopReason,
    TextDelta,
    Usage,
    retry_after_seconds,
    status_kind,
)

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..messages import ModelConfig

STOP_REASONS: dict[str, StopReason] = {
    reason: reason
    for reason in ("end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal", "pause_turn")
}

NO_KEY = "no API key: set ANTHROPIC_API_KEY or pass api_key"

STREAM_ERROR_KINDS: dict[str, ErrorKind] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limit",
    "api_error": "server",
}


class AnthropicProvider:
    """``api_key`` / ``base_url`` None: the SDK reads ``ANTHROPIC_API_KEY`` /
    ``ANTHROPIC_BASE_URL``."""

    name = "anthropic"

    def __init__(
        self, *, api_key: str | None = None, base_url: str | None = None, timeout_s: float = 60.0
    ) -> None:
        self.api_key, self.base_url, self.timeout_s = api_key, base_url, timeout_s
        remember(api_key)  # masked in every message from now on
        self._client: anthropic.AsyncAnthropic | None = None

    async def start(self) -> None:
        """Nothing to load: the client is made by the first ``stream``, so a
        missing key surfaces there as a ``ProviderError``."""

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _get_client(self) -> anthropic.AsyncAnthropic:
        """The SDK client, made on first use so a missing key is reported by
        ``stream`` as a ``ProviderError`` rather than at construction."""
        if self._client is None:
            try:
                self._client = anthropic.AsyncAnthropic(
                    api_key=self.api_key,
                    base_url=self.base_url,
                    max_retries=0,
                    timeout=self.timeout_s,
                )
            except anthropic.AnthropicError as exc:  # e.g. a missing credentials profile
                raise ProviderError(self.name, "auth", f"{NO_KEY} ({exc})") from exc
        client = self._client
        if client.api_key is None and client.auth_token is None and client.credentials is None:
            raise ProviderError(self.name, "auth", NO_KEY)
        return client

    async def stream(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> AsyncGenerator[ProviderOutput, None]:
        params = request_params(built, config)
        prefill = built.mode == "prefill"
        try:
            client = self._get_client()
            if not streaming:
                message = await client.messages.create(stream=False, **params)
                for item in _message_outputs(message, prefill):
                    yield item
                return
            events = await client.messages.create(stream=True, **params)
            try:
                reader = _StreamReader(prefill)
                async for event in events:
                    for item in reader.read(event):
                        yield item
                if not reader.stopped:
                    raise ProviderError(self.name, "connection", "stream ended before message_stop")
            finally:
                # Close the HTTP response at once, even when cancelled or already broken.
                with anyio.CancelScope(shield=True), suppress(httpx2.HTTPError, httpx2.StreamError):
                    await events.close()
        except ProviderError as ours:
            raise ours.at(self._where()) from ours.__cause__
        except Exception as exc:
            error = provider_error(exc)
            if error is None:
                raise
            raise error.at(self._where()) from exc

    def _where(self) -> str | None:
        return str(self._client.base_url) if self._client is not None else self.base_url


class _StreamReader:
    """Raw stream events → provider outputs, keeping the state of the open block."""

    def __init__(self, prefill: bool) -> None:
        self.prefill = prefill
        self.usage = Usage()
        self.native = False  # the open block was announced with NativeStart
        self.signature = ""
        self.stop = StopInfo("other")
        self.stopped = False

    def read(self, event: Any) -> list[ProviderOutput]:
        if isinstance(event, wire.RawContentBlockDeltaEvent):
            return self._delta(event.delta)
        if isinstance(event, wire.RawContentBlockStartEvent):
            return self._start(event.content_block)
        if isinstance(event, wire.RawContentBlockStopEvent):
            out: list[ProviderOutput] = []
            if self.native:
                out.append(NativeStop(signature=self.signature or None))
            self.native, self.signature = False, ""
            return out
        if isinstance(event, wire.RawMessageStartEvent):
            self.usage = usage_of(event.message.usage)
            return [self.usage]
        if isinstance(event, wire.RawMessageDeltaEvent):
            self.usage = usage_of(event.usage, self.usage)
            self.stop = stop_info(event.delta.stop_reason, event.delta.stop_sequence)
            return [self.usage]
        if isinstance(event, wire.RawMessageStopEvent):
            self.stopped = True
            return [self.stop]
        return []

    def _start(self, block: Any) -> list[ProviderOutput]:
        out: list[ProviderOutput] = []
        if block.type == "text":
            if not self.prefill:
                out.append(NativeStart("text"))
                self.native = True
            if block.text:
                out.append(NativeDelta(block.text) if self.native else TextDelta(block.text))
        elif block.type == "thinking":
            out.append(NativeStart("thinking"))
            self.native, self.signature = True, block.signature or ""
            if block.thinking:
                out.append(NativeDelta(block.thinking))
        elif block.type == "redacted_thinking":
            out.append(NativeStart("thinking", redacted_data=block.data))
            self.native = True
        elif block.type == "tool_use":
            out.append(NativeStart("tool_call", block.id, block.name))
            self.native = True
            if block.input:  # streamed input normally starts empty
                out.append(NativeDelta(json.dumps(block.input)))
        return out  # server tools and their results are not part of a spoken reply

    def _delta(self, delta: Any) -> list[ProviderOutput]:
        if delta.type == "text_delta" and delta.text:
            return [NativeDelta(delta.text) if self.native else TextDelta(delta.text)]
        if delta.type == "thinking_delta" and delta.thinking:
            return [NativeDelta(delta.thinking)]
        if delta.type == "input_json_delta" and delta.partial_json:
            return [NativeDelta(delta.partial_json)]
        if delta.type == "signature_delta":
            self.signature = delta.signature
        return []


def _message_outputs(message: wire.Message, prefill: bool) -> list[ProviderOutput]:
    """A whole ``Message`` as the items a stream of it would give, each block whole."""
    out: list[ProviderOutput] = [usage_of(message.usage)]
    for block in message.content:
        if block.type == "text" and prefill:
            out += [TextDelta(block.text)] if block.text else []
        elif block.type == "text":
            out += [NativeStart("text"), NativeDelta(block.text), NativeStop()]
        elif block.type == "thinking":
            out += [NativeStart("thinking"), NativeDelta(block.thinking)]
            out.append(NativeStop(signature=block.signature or None))
        elif block.type == "redacted_thinking":
            out += [NativeStart("thinking", redacted_data=block.data), NativeStop()]
        elif block.type == "tool_use":
            out.append(NativeStart("tool_call", block.id, block.name))
            out += [NativeDelta(json.dumps(block.input)), NativeStop(input=dict(block.input))]
    out.append(stop_info(message.stop_reason, message.stop_sequence))
    return out


def usage_of(usage: Any, before: Usage | None = None) -> Usage:
    """``Usage`` from the SDK's usage (message_start) or cumulative delta usage
    (message_delta, whose input counts may be absent: kept from ``before``)."""
    before = before or Usage()
    details = getattr(usage, "output_tokens_details", None)
    thinking = getattr(details, "thinking_tokens", None)

    def count(name: str, default: int) -> int:
        value = getattr(usage, name, None)
        return value if isinstance(value, int) else default

    return Usage(
        input_tokens=count("input_tokens", before.input_tokens),
        output_tokens=count("output_tokens", before.output_tokens),
        cache_creation_input_tokens=count(
            "cache_creation_input_tokens", before.cache_creation_input_tokens
        ),
        cache_read_input_tokens=count("cache_read_input_tokens", before.cache_read_input_tokens),
        thinking_tokens=thinking if isinstance(thinking, int) else before.thinking_tokens,
    )


def stop_info(reason: str | None, stop_sequence: str | None) -> StopInfo:
    return StopInfo(STOP_REASONS.get(reason or "", "other"), stop_sequence, reason)


def provider_error(exc: Exception) -> ProviderError | None:
    """The ``ProviderError`` for an SDK or transport failure (None: not one of ours)."""
    name = AnthropicProvider.name
    if isinstance(exc, anthropic.APIStatusError):
        message = exc.api_message or exc.message
        if exc.status_code < 400:  # an `event: error` inside a 200 stream
            kind = STREAM_ERROR_KINDS.get(str(exc.type or ""), "stream")
            return ProviderError(name, kind, f"{exc.type or 'error'}: {message}")
        retry_after = retry_after_seconds(exc.response.headers)
        return ProviderError(
            name,
            status_kind(exc.status_code),
            message,
            status=exc.status_code,
            retry_after_s=retry_after,
        )
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return ProviderError(name, "timeout", str(exc) or type(exc).__name__)
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError | httpx2.StreamError):
        cause = exc.__cause__ or exc
        return ProviderError(name, "connection", f"{type(cause).__name__}: {cause}")
    if isinstance(exc, json.JSONDecodeError):
        return ProviderError(name, "stream", f"malformed event data (not JSON): {exc.doc[:80]!r}")
    if isinstance(exc, anthropic.AnthropicError):
        return ProviderError(name, "stream", f"{type(exc).__name__}: {exc}")
    if isinstance(exc, TypeError) and "authentication method" in str(exc):
        return ProviderError(name, "auth", NO_KEY)
    return None

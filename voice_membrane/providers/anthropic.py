"""Anthropic Messages API as a ``Provider``, through the official ``anthropic`` SDK.

The SDK's raw event stream (what ``messages.create(stream=True)`` returns; the
body posted through the client's ``post`` as written by
``anthropic_request.streaming_body``) is read item by item by
``anthropic_read.StreamReader``, with no accumulation in between, so
each delta reaches the parser as soon as it arrives. The SDK's retries are off
(``Membrane`` retries), and every failure — HTTP status, an in-stream ``error``
event, a malformed line, a dropped connection — becomes a ``ProviderError``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import anthropic
import anyio
import httpx2
from anthropic.types import Message, RawMessageStreamEvent

from ..infra.redact import remember
from ..vendors.credentials import unusable_key
from ..vendors.errors import ErrorKind, ProviderError, retry_after_seconds, status_kind
from ..vendors.http_pool import pool_limits
from ..vendors.tls import shared_ssl_context, warm_http_stack
from ..vocab.provider_output import ProviderOutput
from .anthropic_read import StreamReader, message_outputs
from .anthropic_request import request_params, streaming_body

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..vocab.messages import ModelConfig

NO_KEY = "no API key: set ANTHROPIC_API_KEY or pass api_key"
MESSAGES_PATH = "/v1/messages"

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
        """The HTTP stack loaded (not in the first turn's request); the client
        is made by the first ``stream``, so a missing key surfaces there as a
        ``ProviderError``."""
        await warm_http_stack()

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _get_client(self) -> anthropic.AsyncAnthropic:
        """The SDK client, made on first use so a missing key is reported by
        ``stream`` as a ``ProviderError`` rather than at construction."""
        if self._client is None:
            problem = unusable_key("anthropic", self.api_key)
            if problem:
                raise ProviderError(self.name, "auth", problem)
            try:
                self._client = anthropic.AsyncAnthropic(
                    api_key=self.api_key,
                    base_url=self.base_url,
                    max_retries=0,
                    timeout=self.timeout_s,
                    http_client=anthropic.DefaultAsyncHttpxClient(
                        verify=shared_ssl_context(), limits=pool_limits()
                    ),
                )
            except anthropic.AnthropicError as exc:  # e.g. a missing credentials profile
                raise ProviderError(self.name, "auth", f"{NO_KEY} ({exc})") from exc
        client = self._client
        if client.api_key is None and client.auth_token is None and client.credentials is None:
            raise ProviderError(self.name, "auth", NO_KEY)
        return client

    def request_body(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> dict[str, Any]:
        """The keyword arguments of the SDK call ``stream`` makes (debug records)."""
        return {**request_params(built, config), "stream": streaming}

    async def stream(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> AsyncGenerator[ProviderOutput, None]:
        params = request_params(built, config)
        prefill = built.mode == "prefill"
        try:
            client = self._get_client()
            if not streaming:
                message = await client.messages.create(stream=False, **params)
                for item in message_outputs(message, prefill):
                    yield item
                return
            # The SDK's own client and stream, the body written here (streaming_body).
            events = await client.post(
                MESSAGES_PATH,
                content=streaming_body(params),
                cast_to=Message,
                stream=True,
                stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
            )
            try:
                reader = StreamReader(prefill)
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
    if isinstance(exc, UnicodeDecodeError):  # the SDK decodes each line as UTF-8
        return ProviderError(name, "stream", f"malformed event data (not UTF-8): {exc.reason}")
    if isinstance(exc, anthropic.AnthropicError):
        return ProviderError(name, "stream", f"{type(exc).__name__}: {exc}")
    if isinstance(exc, TypeError) and "authentication method" in str(exc):
        return ProviderError(name, "auth", NO_KEY)
    return None

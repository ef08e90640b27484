"""OpenAIProvider: Chat Completions (chat mode) and legacy Completions (prefill
mode) over the official ``openai`` SDK — for OpenAI and any OpenAI-compatible
server (vLLM, llama.cpp, OpenRouter, DeepSeek…) given its ``base_url``.

The SDK's retries are off (``Membrane`` holds the retry policy) and its errors
become ``ProviderError``s with one vocabulary of kinds. Request mapping lives in
``openai_request``, response reading in ``openai_read``; this module makes the
calls, keeps the HTTP stream closed when the consumer stops, and maps errors.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import openai

from ..provider_output import ProviderOutput
from ..redact import remember
from ..tls import shared_ssl_context
from .base import ErrorKind, ProviderError, retry_after_seconds, status_kind
from .credentials import unusable_key
from .openai_read import ChatReader, TextReader
from .openai_request import chat_request, completion_request, token_field

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..messages import ModelConfig

# What a call through the SDK raises while its stream is read: one mapping to
# ProviderError for the chat adapter and the Images API.
STREAM_ERRORS = (openai.OpenAIError, httpx2.HTTPError, json.JSONDecodeError, UnicodeDecodeError)

NAME = "openai"
KEY_ENV = "OPENAI_API_KEY"


class OpenAIProvider:
    """``stream(built, config)`` yields native blocks (chat mode) or raw text
    (prefill mode); see ``providers.base.Provider``.

    ``max_tokens_field`` overrides which field carries ``config.max_tokens`` in
    chat mode (default: ``max_completion_tokens`` for api.openai.com,
    ``max_tokens`` elsewhere). ``api_key`` / ``base_url`` default to the SDK's
    ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``.
    """

    name = NAME

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        max_tokens_field: str | None = None,
    ) -> None:
        self._api_key, self._base_url, self._timeout_s = api_key, base_url, timeout_s
        remember(api_key)  # masked in every message from now on
        self._max_tokens_field = max_tokens_field
        self._client: openai.AsyncOpenAI | None = None

    async def start(self) -> None:
        """Nothing to load: the client is made on first use, so a missing key
        surfaces as a ``ProviderError`` from ``stream``."""

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = async_client(self._api_key, self._base_url, self._timeout_s)
        return self._client

    def request_body(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> dict[str, Any]:
        """The keyword arguments of the SDK call ``stream`` makes (debug records)."""
        return self._kwargs(self.client(), built, config, streaming)

    def _kwargs(
        self, client: openai.AsyncOpenAI, built: BuiltRequest, config: ModelConfig, streaming: bool
    ) -> dict[str, Any]:
        if built.mode == "chat":
            field = token_field(str(client.base_url), self._max_tokens_field)
            return chat_request(built, config, max_tokens_field=field, streaming=streaming)
        return completion_request(built, config, streaming=streaming)

    async def stream(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> AsyncGenerator[ProviderOutput, None]:
        client = self.client()
        try:
            kwargs = self._kwargs(client, built, config, streaming)
            if built.mode == "chat":
                reader: ChatReader | TextReader = ChatReader(built.stop_sequences)
                create: Any = client.chat.completions.create
            else:
                reader = TextReader(built.stop_sequences, built.end_of_turn)
                create = client.completions.create
            response = await create(**kwargs)
            if streaming:
                try:
                    async for chunk in response:
                        for item in reader.chunk(chunk):
                            yield item
                        if reader.done:  # a client-side stop: read no further
                            break
                finally:
                    with anyio.CancelScope(shield=True):
                        await response.close()
            elif isinstance(reader, ChatReader):
                for item in reader.completion(response):
                    yield item
            else:
                for item in reader.chunk(response):
                    yield item
            for item in reader.end():
                yield item
        except STREAM_ERRORS as exc:
            raise provider_error(exc).at(str(client.base_url)) from exc


def async_client(
    api_key: str | None, base_url: str | None, timeout: float | httpx2.Timeout
) -> openai.AsyncOpenAI:
    """An SDK client with its own retries off (one policy decides: ``retry.py``);
    ``api_key`` / ``base_url`` default to ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``.
    ``ProviderError`` (auth) for a missing key or one no HTTP header can carry."""
    key = api_key or os.environ.get(KEY_ENV)
    if not key:
        raise ProviderError(NAME, "auth", f"no API key: pass api_key or set {KEY_ENV}")
    problem = unusable_key(NAME, key)
    if problem:
        raise ProviderError(NAME, "auth", problem)
    try:
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=openai.DefaultAsyncHttpxClient(verify=shared_ssl_context()),
        )
    except openai.OpenAIError as exc:
        raise ProviderError(NAME, "bad_request", str(exc)) from exc


def provider_error(exc: BaseException) -> ProviderError:
    """An SDK (or transport) failure as a ``ProviderError``."""
    if isinstance(exc, openai.APIStatusError):
        message = _message(exc.body) or exc.message
        return ProviderError(
            NAME,
            status_kind(exc.status_code),
            message,
            status=exc.status_code,
            retry_after_s=retry_after_seconds(exc.response.headers),
        )
    if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException):
        return ProviderError(NAME, "timeout", "the request timed out")
    if isinstance(exc, openai.APIConnectionError | httpx2.HTTPError):
        cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
        detail = f": {cause}" if cause is not None and str(cause) else ""
        return ProviderError(NAME, "connection", f"connection failed or dropped{detail}")
    if isinstance(exc, openai.APIResponseValidationError):
        return ProviderError(NAME, "stream", f"unexpected response: {exc.message}")
    if isinstance(exc, openai.APIError):  # an error sent inside the stream
        return ProviderError(NAME, stream_error_kind(exc.body), _message(exc.body) or exc.message)
    if isinstance(exc, json.JSONDecodeError):
        return ProviderError(NAME, "stream", f"malformed data (not JSON): {exc.doc[:80]!r}")
    if isinstance(exc, UnicodeDecodeError):  # the SDK decodes each line as UTF-8
        return ProviderError(NAME, "stream", f"malformed data (not UTF-8): {exc.reason}")
    return ProviderError(NAME, "bad_request", str(exc))  # e.g. a client-side OpenAIError


def stream_error_kind(body: object) -> ErrorKind:
    """The kind an in-stream error's ``code`` / ``type`` implies; ``stream`` when
    they say nothing known. OpenRouter sends HTTP codes, OpenAI names."""
    if not isinstance(body, dict):
        return "stream"
    code, kind = body.get("code"), body.get("type")
    number = code if isinstance(code, int) else int(str(code)) if str(code).isdigit() else 0
    if 400 <= number < 600:
        return status_kind(number)
    words = " ".join(str(w) for w in (code, kind) if w)
    if "rate_limit" in words or kind in ("requests", "tokens"):
        return "rate_limit"
    if "overloaded" in words:
        return "overloaded"
    if "server_error" in words or "internal" in words:
        return "server"
    if "timeout" in words:
        return "timeout"
    return "stream"


def _message(body: object) -> str | None:
    """The ``message`` of an OpenAI error body (``{"error": {…}}`` or its inside)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return None

"""OpenAIProvider: Chat Completions (chat mode) and legacy Completions (prefill
mode) over the official ``openai`` SDK — for OpenAI and any OpenAI-compatible
server (vLLM, llama.cpp, OpenRouter, DeepSeek…) given its ``base_url``.

The SDK's retries are off (``Membrane`` holds the retry policy) and its errors
become ``ProviderError``s with one vocabulary of kinds. Request mapping lives in
``openai_request``, response reading in ``openai_read``; this module makes the
calls, keeps the HTTP stream closed when the consumer stops, and maps errors.
The request goes through the SDK's generic ``post`` (its documented path for
any endpoint: auth, base URL, timeouts, status errors) with the JSON body
``openai_request`` builds, not through ``create``, whose parameter transform
walks every message of the conversation on every turn before a byte is sent
(from the call to the request's hand-over, 666 µs for one message and 3,865
for 21 through ``create``; 219 and 261 this way: ``bench/request_cost.py``).
A stream's body is read as JSON dicts (``vendors/openai_stream``), not as the
SDK's pydantic chunks.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import openai
from openai.types import Completion
from openai.types.chat import ChatCompletion

from ..infra.redact import remember
from ..vendors.openai_client import NAME, STREAM_ERRORS, async_client, provider_error
from ..vendors.openai_stream import chunks
from ..vendors.tls import warm_http_stack
from ..vocab.provider_output import ProviderOutput
from .openai_read import ChatReader, TextReader
from .openai_request import chat_request, completion_request, token_field

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..vocab.messages import ModelConfig


CHAT_PATH = "/chat/completions"
COMPLETIONS_PATH = "/completions"  # legacy Completions: prefill mode


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
        """The HTTP stack loaded (not in the first turn's request); the client
        is made on first use, so a missing key surfaces as a ``ProviderError``
        from ``stream``."""
        await warm_http_stack()

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
        """The JSON body ``stream`` posts (debug records)."""
        return self._body(self.client(), built, config, streaming)

    def _body(
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
            body = self._body(client, built, config, streaming)
            reader: ChatReader | TextReader
            whole: type[ChatCompletion | Completion]
            if built.mode == "chat":
                reader, path, whole = ChatReader(built.stop_sequences), CHAT_PATH, ChatCompletion
            else:
                reader = TextReader(built.stop_sequences, built.end_of_turn)
                path, whole = COMPLETIONS_PATH, Completion
            if streaming:
                # The raw response, its body not yet read: the SDK has already
                # raised its status error if there was one.
                response = await client.post(path, body=body, cast_to=httpx2.Response, stream=True)
                streamed = chunks(response)
                try:
                    async for chunk in streamed:
                        for item in reader.chunk(chunk):
                            yield item
                        if reader.done:  # a client-side stop: read no further
                            break
                finally:
                    with anyio.CancelScope(shield=True):
                        await streamed.aclose()
                        await response.aclose()
            else:
                completion = await client.post(path, body=body, cast_to=whole)
                if isinstance(reader, ChatReader):
                    for item in reader.completion(completion):
                        yield item
                else:
                    for item in reader.chunk(completion):
                        yield item
            for item in reader.end():
                yield item
        except STREAM_ERRORS as exc:
            raise provider_error(exc).at(str(client.base_url)) from exc

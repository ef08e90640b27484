"""The Gemini API as a ``Provider``, through the official ``google-genai`` SDK.

Each streamed chunk's parts are mapped as they arrive, with no accumulation in
between. Gemini sends parts, not blocks: consecutive parts of one kind form a
block, and a change of kind closes the open one.

- Chat mode: text parts → ``NativeStart("text")`` / ``NativeDelta``; thought
  parts → a hidden ``thinking`` block; a ``functionCall`` part (always whole) →
  a ``tool_call`` with its input and thought signature on ``NativeStop``, its
  id from the API or generated (``gemini_call_<n>``). A thought signature that
  arrives on the part after the thoughts (where Gemini puts it) closes the
  thinking block with it; one on a text part with no thinking before it is
  dropped (the API requires signatures back only on function calls).
  ``finishReason`` STOP reads as ``tool_use`` when the reply made calls (Gemini
  says STOP after them).
- Prefill mode: text is raw ``TextDelta`` for the XML parser, thoughts wrapped
  in ``<thinking>…</thinking>`` so the parser hides them.

Signatures are reported as standard base64 (the wire form) and sent back as
they came. The API takes five stop sequences; the rest, and the end-of-turn
token (``BuiltRequest.end_of_turn``: stripped, read as ``end_turn``), are found
client-side, after which the stream is closed. A stop sequence the API applies
itself is reported as ``end_turn``: Gemini says STOP for both.

The SDK's retries, automatic function calling and automatic continuation are
off (``Membrane`` retries). The SDK does not close the HTTP response when its
async stream is closed, so the adapter keeps hold of the response (an httpx
event hook) and closes it itself; were the SDK to stream over aiohttp (it does
when aiohttp is installed) the response is released when the SDK's generators
are finalized instead.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import AsyncGenerator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, cast

import anyio
import httpx2
import pydantic
from google import genai
from google.genai import errors, types

from ..infra.redact import remember
from ..vendors.credentials import unusable_key
from ..vendors.errors import ProviderError, retry_after_seconds, status_kind
from ..vendors.tls import shared_ssl_context, warm_http_stack
from ..vocab.provider_output import ProviderOutput
from . import gemini_send
from .gemini_read import NAME, ChunkReader
from .gemini_request import call_contents, client_stops, request_config, request_contents
from .loop_pools import PerLoopTransport

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..vocab.messages import ModelConfig

BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/"  # google-genai's own
NO_KEY = "no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) or pass api_key"

# The HTTP responses opened by the stream being read in this context.
_RESPONSES: ContextVar[list[Any] | None] = ContextVar("gemini_responses", default=None)


async def _keep_response(response: Any) -> None:
    """httpx event hook: hands each response to the stream that opened it."""
    sink = _RESPONSES.get()
    if sink is not None:
        sink.append(response)


class GeminiProvider:
    """``api_key`` / ``base_url`` None: the SDK reads ``GOOGLE_API_KEY`` or
    ``GEMINI_API_KEY`` / ``GOOGLE_GEMINI_BASE_URL``."""

    name = NAME

    def __init__(
        self, *, api_key: str | None = None, base_url: str | None = None, timeout_s: float = 60.0
    ) -> None:
        self.api_key, self.base_url, self.timeout_s = api_key, base_url, timeout_s
        remember(api_key)  # masked in every message from now on
        self._client: genai.Client | None = None
        self._ids = itertools.count(1)  # generated tool call ids, unique per provider

    async def start(self) -> None:
        await warm_http_stack()  # off the event loop
        self._get_client()

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aio.aclose()
            client.close()

    def _get_client(self) -> genai.Client:
        """The SDK client, made on first use so a missing key is reported by
        ``stream`` as a ``ProviderError`` rather than at construction."""
        if self._client is None:
            options = types.HttpOptions(
                base_url=self.base_url,
                timeout=max(1, round(self.timeout_s * 1000)),  # milliseconds
                retry_options=types.HttpRetryOptions(attempts=1),
                async_client_args={
                    "event_hooks": {"response": [_keep_response]},
                    # Our own transport: with aiohttp installed (another package may
                    # bring it) the SDK would take it instead, and lose the hook.
                    "transport": PerLoopTransport(verify=shared_ssl_context()),
                },
            )
            problem = unusable_key(NAME, self.api_key)
            if problem:
                raise ProviderError(NAME, "auth", problem)
            try:
                self._client = genai.Client(api_key=self.api_key, http_options=options)
            except ValueError as exc:
                message = NO_KEY if "API key" in str(exc) else str(exc)
                raise ProviderError(NAME, "auth", message) from exc
        return self._client

    def request_body(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> dict[str, Any]:
        """The arguments of the SDK call ``stream`` makes, as JSON (debug records;
        bytes as base64, as on the wire)."""
        return {
            "model": config.model,
            "contents": [
                content.model_dump(mode="json", exclude_none=True)
                for content in request_contents(built)
            ],
            "config": request_config(built, config).model_dump(mode="json", exclude_none=True),
            "stream": streaming,
        }

    async def stream(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> AsyncGenerator[ProviderOutput, None]:
        request = request_config(built, config)
        prefill, stops = built.mode == "prefill", client_stops(built)
        reader = ChunkReader(prefill, stops, built.end_of_turn, self._ids)
        try:
            client = self._get_client()
            models = client.aio.models
            if not streaming:
                try:
                    if gemini_send.available(models):
                        response = await gemini_send.generate(models, config.model, built, request)
                    else:
                        response = await models.generate_content(
                            model=config.model, contents=call_contents(built), config=request
                        )
                except Exception as exc:
                    raise unreadable_chunk(exc) from exc
                for item in [*reader.read(response), *reader.end(complete=True)]:
                    yield item
                return
            opened: list[Any] = []
            if gemini_send.available(models):  # the conversation as wire JSON: flat in its length
                chunks = gemini_send.stream(models, config.model, built, request)
            else:
                chunks = cast(
                    AsyncGenerator[Any, None],
                    await models.generate_content_stream(
                        model=config.model, contents=call_contents(built), config=request
                    ),
                )
            try:
                while not reader.done:
                    token = _RESPONSES.set(opened)
                    try:
                        chunk = await anext(chunks)
                    except StopAsyncIteration:
                        break
                    except Exception as exc:
                        raise unreadable_chunk(exc) from exc
                    finally:
                        _RESPONSES.reset(token)
                    for item in reader.read(chunk):
                        yield item
                for item in reader.end(complete=reader.done or reader.finish is not None):
                    yield item
            finally:
                with anyio.CancelScope(shield=True):  # close the HTTP response even when cancelled
                    await chunks.aclose()
                    for response in opened:
                        await response.aclose()
        except ProviderError as ours:
            raise ours.at(self._where()) from ours.__cause__
        except Exception as exc:
            error = provider_error(exc)
            if error is None:
                raise
            raise error.at(self._where()) from exc

    def _where(self) -> str:
        return self.base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL


def unreadable_chunk(exc: Exception) -> ProviderError:
    """A failure while the SDK reads the next chunk. The SDK parses each chunk
    into its types and fails in its own ways on data it does not expect (a
    mistyped enum raises ``AttributeError`` from the enum's lookup): model output
    is untrusted, so any such failure ends the reply as a ``stream`` error."""
    known = provider_error(exc)
    if known is not None:
        return known
    return ProviderError(NAME, "stream", f"unreadable response chunk: {type(exc).__name__}: {exc}")


_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _retry_info(details: Any) -> float | None:
    """The delay of a ``google.rpc.RetryInfo`` error detail (``"7s"``), if any."""
    error = details.get("error", details) if isinstance(details, dict) else None
    for detail in (error or {}).get("details") or []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            match = _DELAY.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def provider_error(exc: BaseException) -> ProviderError | None:
    """The ``ProviderError`` for an SDK or transport failure (None: not one of ours)."""
    if isinstance(exc, errors.APIError):
        code = exc.code if isinstance(exc.code, int) else 500
        message = f"{exc.status}: {exc.message}" if exc.status else str(exc.message or exc)
        status = getattr(exc.response, "status_code", None)
        if not isinstance(status, int) or status < 400:  # {"error"} inside a 200 stream
            kind = status_kind(code) if code == 429 or code >= 500 else "stream"
            return ProviderError(NAME, kind, f"error event {code} {message}")
        headers = getattr(exc.response, "headers", None)
        retry_after = retry_after_seconds(headers)
        if retry_after is None:
            retry_after = _retry_info(exc.details)
        kind = status_kind(code)
        return ProviderError(NAME, kind, message, status=code, retry_after_s=retry_after)
    if isinstance(exc, errors.UnknownApiResponseError | json.JSONDecodeError):
        raw = str(exc).partition("Raw response: ")[2] or getattr(exc, "doc", "")
        return ProviderError(NAME, "stream", f"malformed response data (not JSON): {raw[:80]!r}")
    if isinstance(exc, UnicodeDecodeError):
        return ProviderError(NAME, "stream", f"malformed response data (not UTF-8): {exc.reason}")
    if isinstance(exc, pydantic.ValidationError):
        return ProviderError(NAME, "stream", f"unexpected response shape: {exc}")
    if isinstance(exc, httpx2.TimeoutException | TimeoutError):
        return ProviderError(NAME, "timeout", f"{type(exc).__name__}: {exc}".rstrip(": "))
    foreign = type(exc).__module__.split(".")[0] in ("httpx", "aiohttp")  # other transports
    if foreign and "Timeout" in type(exc).__name__:
        return ProviderError(NAME, "timeout", f"{type(exc).__name__}: {exc}".rstrip(": "))
    if foreign or isinstance(exc, httpx2.TransportError | httpx2.StreamError | OSError):
        return ProviderError(NAME, "connection", f"{type(exc).__name__}: {exc}")
    return None

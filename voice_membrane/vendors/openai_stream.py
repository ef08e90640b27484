"""OpenAI's streamed replies read as plain JSON, without the SDK's per-chunk objects.

The SDK's ``AsyncStream`` builds a pydantic object (``construct``, unvalidated)
for every streamed chunk: about a third of the LLM path's CPU in a loaded server.
The adapter still makes the call through the SDK (auth, base URL, timeouts, the
HTTP status errors), with its generic ``post`` for the raw response, and reads the body here
the way ``AsyncStream`` reads it: SSE events (``sse.py``) up to ``data: [DONE]``,
each ``json.loads``-ed into a dict, one that carries ``error`` raised as the
SDK's ``APIError`` (so ``provider_error`` maps both paths alike). The readers
(``providers/openai_read.py``) take dicts and SDK objects alike.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any

import anyio
import httpx2
import openai
from anyio.lowlevel import checkpoint

from .sse import SseDecoder

DONE = "[DONE]"
DRAIN_S = 0.1  # as the SDK: how long the bytes after [DONE] are read for the connection's reuse
IN_STREAM_ERROR = "An error occurred during streaming"  # the SDK's message when none is sent


class ChunkDecoder:
    """Body bytes → each streamed chunk's JSON (any JSON value: the readers treat
    it as untrusted), lazily. ``ended`` turns true at ``[DONE]``, after which
    nothing more is read. Malformed JSON raises ``json.JSONDecodeError``, a line
    that is not UTF-8 ``UnicodeDecodeError``, an in-stream error ``openai.APIError``:
    each where it comes, after every chunk before it."""

    def __init__(self, request: httpx2.Request) -> None:
        self._sse = SseDecoder()
        self._request = request  # what the SDK's errors carry
        self.ended = False

    def feed(self, piece: bytes) -> Iterator[Any]:
        if self.ended:
            return
        for event in self._sse.feed(piece):
            if event.data.startswith(DONE):
                self.ended = True
                return
            data = json.loads(event.data)
            if event.event is not None and event.event.startswith("thread."):
                continue  # the Assistants API's events: the SDK gives them no chunk's shape
            if type(data) is dict and data.get("error"):
                raise in_stream_error(data["error"], self._request)
            yield data

    def end(self) -> None:
        """The body ended (without ``[DONE]``)."""
        self._sse.end()


async def chunks(response: httpx2.Response) -> AsyncGenerator[Any, None]:
    """Each streamed chunk's JSON, until ``[DONE]`` or the body's end. Transport
    errors come out as httpx's (``provider_error`` maps them as the SDK's)."""
    decoder = ChunkDecoder(response.request)
    body = response.aiter_bytes()
    async for piece in body:
        for chunk in decoder.feed(piece):
            yield chunk
        if decoder.ended:
            if response.http_version == "HTTP/1.1":
                await drain(body)
            return
    decoder.end()


def in_stream_error(error: Any, request: httpx2.Request) -> openai.APIError:
    """The ``APIError`` the SDK raises for an ``{"error": …}`` chunk."""
    message = error.get("message") if isinstance(error, dict) else None
    if not message or not isinstance(message, str):
        message = IN_STREAM_ERROR
    return openai.APIError(message=message, request=request, body=error)


async def drain(body: AsyncIterator[bytes]) -> None:
    """Read what follows ``[DONE]`` (the end of the chunked body) for a short while,
    as the SDK does on HTTP/1.1, so the connection goes back to the pool instead
    of being closed. A failure here ends nothing: the reply is complete."""
    try:
        with anyio.move_on_after(DRAIN_S):
            async for _ in body:
                await checkpoint()  # the deadline holds even when data is buffered
    except httpx2.HTTPError:
        pass

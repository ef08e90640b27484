"""A fake Anthropic Messages API on loopback, for testing apps offline.

``FakeAnthropic`` answers ``POST /v1/messages`` in the real wire protocol —
streaming (SSE with ``event:`` lines) or a whole ``Message`` — so the official
``anthropic`` SDK, or any app built on it, runs against it unchanged. Point the
SDK at it and script the replies::

    from anthropic import AsyncAnthropic
    from voice_membrane.testing.fake_anthropic import FakeAnthropic
    from voice_membrane.testing.script import ScriptedReply, thinking, tool_use

    weather = tool_use("get_weather", {"city": "Paris"})
    with FakeAnthropic(
        ScriptedReply.of(thinking("Weather?"), "Let me check.", weather, delta_delay_s=0.01),
        ScriptedReply.http_error(529, retry_after=1),
    ) as server:
        client = AsyncAnthropic(base_url=server.base_url, api_key="fake-key", max_retries=0)
        async with client.messages.stream(
            model="claude-x", max_tokens=256, messages=[{"role": "user", "content": "Hi"}]
        ) as stream:
            message = await stream.get_final_message()  # thinking, text, tool_use
        assert server.requests[0].body["model"] == "claude-x"

A subprocess (or code that builds its own client) finds it through the
environment: ``env={**os.environ, **server.env()}`` sets ``ANTHROPIC_BASE_URL``
and ``ANTHROPIC_API_KEY``. Faults (``ScriptedReply.http_error``, ``Fault``
``error_event`` / ``malformed`` / ``drop``) play the real failures: an error
status with the vendor's error JSON and ``retry-after``, an ``event: error``
mid-stream, a ``data:`` line that is not JSON, a connection closed mid-body.

Replies are served in order, one per request; with none left the fake answers
500; ``reset()`` clears queue, requests and counters to reuse one server. Like
the real API it rejects (400 ``invalid_request_error``) a final assistant
message (prefill) that ends in whitespace, ``thinking`` together with a final
assistant message that does not start with thinking, and a ``temperature``
other than 1 with thinking. Tool-use ids the script leaves out are generated as
``toolu_fake_<n>``. Streams the client closes early are counted in
``cancelled_streams``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .fake_server import (
    DropConnection,
    FakeServer,
    ReplyClock,
    paced,
    raw_event,
    sse,
    whole_response,
)
from .script import ScriptBlock, ScriptedReply

PING = b'event: ping\ndata: {"type":"ping"}\n\n'  # the API's keep-alive

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str, request_id: str = "req_fake") -> dict[str, Any]:
    """The vendor's error JSON for an HTTP status (also an in-stream error's data)."""
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}


class FakeAnthropic(FakeServer):
    vendor = "anthropic"

    def __init__(self, *replies: ScriptedReply) -> None:
        super().__init__(*replies)
        self._ids = itertools.count(1)  # request and message ids
        self._tool_ids = itertools.count(1)

    def reset_ids(self) -> None:
        self._ids, self._tool_ids = itertools.count(1), itertools.count(1)

    def routes(self) -> list[Route]:
        return [Route("/v1/messages", self._messages, methods=["POST"])]

    def env(self) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": self.origin, "ANTHROPIC_API_KEY": "fake-key"}

    # ------------------------------------------------------------ the endpoint

    async def _messages(self, request: Request) -> Response:
        body = await self.record(request)
        clock = ReplyClock(anyio.current_time())  # the deltas' deadlines
        n = next(self._ids)
        headers = {"request-id": f"req_fake_{n}"}
        if not (request.headers.get("x-api-key") or request.headers.get("authorization")):
            return self._error(401, "x-api-key header is required", headers)
        problem = invalid_request(body)
        if problem is not None:
            return self._error(400, problem, headers)
        reply = await self.take_reply(request, headers, self._error)
        if isinstance(reply, Response):
            return reply
        message = self._message(reply, body, n)
        if body.get("stream"):
            return self.stream(self._events(reply, message, clock), headers=headers)
        return whole_response(reply, message, headers, self._error)

    @staticmethod
    def _error(status: int, message: str, headers: dict[str, str]) -> JSONResponse:
        return JSONResponse(
            error_body(status, message, headers["request-id"]), status_code=status, headers=headers
        )

    def _message(self, reply: ScriptedReply, body: dict[str, Any], n: int) -> dict[str, Any]:
        """The whole reply as a ``Message`` (what a non-streaming call returns)."""
        content = [self._content(block) for block in reply.blocks]
        stop_sequence = None
        if reply.final_stop == "stop_sequence":
            stops = body.get("stop_sequences") or [None]
            stop_sequence = reply.stop_sequence or stops[0]
        return {
            "id": f"msg_fake_{n}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-fake"),
            "content": content,
            "stop_reason": reply.final_stop,
            "stop_sequence": stop_sequence,
            "usage": {
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.usage_out(),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }

    def _content(self, block: ScriptBlock) -> dict[str, Any]:
        if block.type == "text":
            return {"type": "text", "text": block.text}
        if block.type == "thinking":
            return {"type": "thinking", "thinking": block.text, "signature": block.signature}
        if block.type == "redacted_thinking":
            return {"type": "redacted_thinking", "data": block.signature}
        tool_id = block.id or f"toolu_fake_{next(self._tool_ids)}"
        return {"type": "tool_use", "id": tool_id, "name": block.name, "input": block.input}

    # ------------------------------------------------------------ the stream

    async def _events(
        self, reply: ScriptedReply, message: dict[str, Any], clock: ReplyClock
    ) -> AsyncIterator[bytes]:
        fault = reply.fault
        sent = 0  # content deltas so far

        async def faulted(end: bool = False) -> bytes | None:
            """The fault's bytes if it fires now (DropConnection is raised); at the
            end it fires even when the reply had fewer deltas than ``after_deltas``."""
            if (
                fault is None
                or fault.kind == "http_error"
                or (sent != fault.after_deltas and not end)
            ):
                return None
            if fault.kind == "drop":
                raise DropConnection
            if fault.kind == "error_event":
                return sse(error_body(fault.status, fault.message), "error")
            return b"event: content_block_delta\ndata: {not json\n\n"

        usage = message["usage"]
        start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
        start["usage"] = {**usage, "output_tokens": min(1, usage["output_tokens"])}
        yield sse({"type": "message_start", "message": start}, "message_start")
        for index, (block, whole) in enumerate(zip(reply.blocks, message["content"], strict=True)):
            opening = _opening(whole)
            yield sse(
                {"type": "content_block_start", "index": index, "content_block": opening},
                "content_block_start",
            )
            if index == 0:
                yield sse({"type": "ping"}, "ping")
            if block.type == "tool_use":
                yield _delta(index, {"type": "input_json_delta", "partial_json": ""})
            for delta in _deltas(reply, block, whole):
                if (bad := await faulted()) is not None:
                    yield bad
                    return
                for raw in reply.raw_due(sent):
                    yield raw_event(raw)
                async for beat in paced(reply, sent, PING, clock):
                    yield beat
                yield _delta(index, delta)
                sent += 1
            if block.type == "thinking" and block.signature:
                yield _delta(index, {"type": "signature_delta", "signature": block.signature})
            yield sse({"type": "content_block_stop", "index": index}, "content_block_stop")
        if (bad := await faulted(end=True)) is not None:
            yield bad
            return
        for raw in reply.raw_due(sent, end=True):
            yield raw_event(raw)
        yield sse(
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": message["stop_reason"],
                    "stop_sequence": message["stop_sequence"],
                },
                "usage": {"output_tokens": usage["output_tokens"]},
            },
            "message_delta",
        )
        yield sse({"type": "message_stop"}, "message_stop")


def _opening(whole: dict[str, Any]) -> dict[str, Any]:
    """A block as ``content_block_start`` announces it (content still empty)."""
    if whole["type"] == "text":
        return {"type": "text", "text": ""}
    if whole["type"] == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    if whole["type"] == "tool_use":
        return {**whole, "input": {}}
    return whole  # redacted_thinking arrives whole


def _deltas(
    reply: ScriptedReply, block: ScriptBlock, whole: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """The content deltas of one block (the ones a fault's ``after_deltas`` counts)."""
    if block.type == "text":
        for piece in reply.pieces(block.text):
            yield {"type": "text_delta", "text": piece}
    elif block.type == "thinking":
        for piece in reply.pieces(block.text):
            yield {"type": "thinking_delta", "thinking": piece}
    elif block.type == "tool_use":
        for piece in reply.pieces(json.dumps(whole["input"])):
            yield {"type": "input_json_delta", "partial_json": piece}


def _delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse(
        {"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"
    )


def invalid_request(body: Any) -> str | None:
    """What the real API would reject in this body with a 400, if anything."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    messages, max_tokens = body["messages"], body["max_tokens"]
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens: Input should be a positive integer"
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    prefill = last.get("role") == "assistant"
    content = last.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    blocks = [block for block in content or [] if isinstance(block, dict)]
    final = blocks[-1] if prefill and blocks else {}
    if final.get("type") == "text" and str(final.get("text", "")).rstrip() != final["text"]:
        return "messages: final assistant content cannot end with trailing whitespace"
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if budget >= max_tokens:
            return "`max_tokens` must be greater than `thinking.budget_tokens`"
        if body.get("temperature", 1) != 1:
            return "`temperature` may only be set to 1 when thinking is enabled"
        if prefill and (
            not blocks or blocks[0].get("type") not in ("thinking", "redacted_thinking")
        ):
            return (
                f"messages.{len(messages) - 1}.content.0.type: Expected `thinking` or "
                "`redacted_thinking`, but found `text`. When `thinking` is enabled, a final "
                "`assistant` message must start with a thinking block."
            )
    return None

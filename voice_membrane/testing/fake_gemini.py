"""A fake Gemini API (``generateContent``) on loopback, for testing apps offline.

``FakeGemini`` answers ``POST /{version}/models/{model}:streamGenerateContent?alt=sse``
and ``:generateContent`` (any API version: google-genai 3.x sends ``v1``, older
releases ``v1beta``) in the real wire shape, so the official ``google-genai``
SDK, or any app built on it, runs against it unchanged. Point the SDK at it and
script the replies::

    from google import genai
    from google.genai import types
    from voice_membrane.testing.fake_gemini import FakeGemini
    from voice_membrane.testing.script import ScriptedReply, thinking, tool_use

    with FakeGemini(
        ScriptedReply.of(
            thinking("Weather."), "Let me check.", tool_use("get_weather", {"city": "Paris"})
        ),
        ScriptedReply.http_error(429, retry_after=1),
    ) as server:
        client = genai.Client(
            api_key="fake-key", http_options=types.HttpOptions(base_url=server.base_url)
        )
        ...  # or run a subprocess with env={**os.environ, **server.env()}
        assert server.requests[0].body["contents"][0]["role"] == "user"

How a script becomes Gemini's stream (``data: {json}\\r\\n\\r\\n`` events, one part
per event, ``role: "model"``):

- text is cut into ``delta_chars`` pieces, one ``{"text"}`` part each; thinking
  the same as ``{"text", "thought": true}`` parts;
- a generated image (``script.image``) is one whole ``inlineData`` part
  (``mimeType``, base64 ``data``), as image-output models send it;
- a tool use is one whole ``functionCall`` part (Gemini never streams a call's
  arguments); its ``id`` is sent only when the script gives one (the Gemini
  Developer API often leaves it out);
- a thinking block's signature travels as the real API sends it: base64 in
  ``thoughtSignature`` on the first part *after* the thoughts (the function
  call, or the first text piece), or on the thought's last part when nothing
  follows; redacted thinking has no Gemini form and is left out;
- the last event carries ``finishReason`` (``STOP`` — also after function calls
  and for ``stop_sequence`` — or ``MAX_TOKENS``) and the final ``usageMetadata``
  (earlier events carry only the prompt count, as the real API's do).

Faults: ``http_error`` → that status with Google's error JSON (and a
``retry-after`` header and a ``RetryInfo`` detail when scripted);
``error_event`` → ``data: {"error": {...}}`` after ``after_deltas`` content
parts; ``malformed`` → a ``data:`` line that is not JSON; ``drop`` → the
connection closes. Stop sequences are not applied: script the cut text. Like
the real API the fake answers 403 without an API key and 400 for missing
``contents`` or more than five stop sequences. Replies are served in order; with
none left the fake answers 500. Streams the client closes early are counted in
``cancelled_streams``.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import AsyncIterator
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

STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

FINISH_REASONS = {
    "end_turn": "STOP",
    "tool_use": "STOP",
    "stop_sequence": "STOP",
    "max_tokens": "MAX_TOKENS",
}

MAX_STOP_SEQUENCES = 5


def error_body(code: int, message: str, retry_after: float | None = None) -> dict[str, Any]:
    """Google's error JSON (also an in-stream error event's data)."""
    status = STATUSES.get(code, "INTERNAL" if code >= 500 else "FAILED_PRECONDITION")
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if retry_after is not None:
        error["details"] = [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after:g}s"}
        ]
    return {"error": error}


def pick(mapping: Any, *names: str) -> Any:
    """The first of ``names`` present in ``mapping`` (camelCase or snake_case)."""
    if not isinstance(mapping, dict):
        return None
    for name in names:
        if name in mapping:
            return mapping[name]
    return None


class FakeGemini(FakeServer):
    vendor = "gemini"

    def __init__(self, *replies: ScriptedReply) -> None:
        super().__init__(*replies)
        self._ids = itertools.count(1)

    def reset_ids(self) -> None:
        self._ids = itertools.count(1)

    def routes(self) -> list[Route]:
        return [Route("/{version}/models/{target:path}", self._models, methods=["POST"])]

    def env(self) -> dict[str, str]:
        """The variables google-genai 3.x reads (``GOOGLE_API_KEY`` wins over
        ``GEMINI_API_KEY`` when both are set)."""
        return {"GOOGLE_GEMINI_BASE_URL": self.origin, "GEMINI_API_KEY": "fake-key"}

    # ------------------------------------------------------------ the endpoint

    async def _models(self, request: Request) -> Response:
        body = await self.record(request)
        clock = ReplyClock(anyio.current_time())  # the deltas' deadlines
        target = request.path_params["target"]
        _, _, method = target.rpartition(":")
        headers = {"x-request-id": f"fake-{next(self._ids)}"}
        if method not in ("generateContent", "streamGenerateContent"):
            return _error(404, f"method {method!r} is not served by the fake", headers)
        if not (request.headers.get("x-goog-api-key") or request.query_params.get("key")):
            return _error(403, "Method doesn't allow unregistered callers: no API key", headers)
        problem = invalid_request(body)
        if problem is not None:
            return _error(400, problem, headers)
        reply = await self.take_reply(request, headers, _error)
        if isinstance(reply, Response):
            return reply
        model = target.rpartition(":")[0].rpartition("/")[2]
        events = Events(reply, model, f"resp-fake-{next(self._ids)}")
        if method == "generateContent":
            return events.whole(headers)
        return self.stream(events.stream(clock), headers)


def _error(code: int, message: str, headers: dict[str, str]) -> JSONResponse:
    # The body repeats a retry-after header as google.rpc.RetryInfo, as the API does.
    retry_after = float(headers["retry-after"]) if "retry-after" in headers else None
    return JSONResponse(error_body(code, message, retry_after), status_code=code, headers=headers)


class Events:
    """One scripted reply as Gemini response chunks."""

    def __init__(self, reply: ScriptedReply, model: str, response_id: str) -> None:
        self.reply, self.model, self.response_id = reply, model, response_id
        self.thoughts = sum(
            len(list(reply.pieces(b.text))) for b in reply.blocks if b.type == "thinking"
        )

    def parts(self, streaming: bool) -> list[dict[str, Any]]:
        """The reply's parts: one per streamed delta, or one per block."""
        out: list[dict[str, Any]] = []
        signature: str | None = None  # a thinking signature waiting for the next part
        for block in self.reply.blocks:
            if block.type == "redacted_thinking":
                continue
            pieces = self._pieces(block, streaming)
            if signature is not None and pieces:
                pieces[0]["thoughtSignature"] = signature
                signature = None
            out += pieces
            if block.type == "thinking" and block.signature:
                signature = base64.b64encode(block.signature.encode()).decode()
        if signature is not None:  # nothing followed the thoughts: on their last part
            for part in reversed(out):
                if part.get("thought"):
                    part["thoughtSignature"] = signature
                    break
        return out

    def _pieces(self, block: ScriptBlock, streaming: bool) -> list[dict[str, Any]]:
        if block.type == "image":
            data = base64.b64encode(block.image).decode()
            return [{"inlineData": {"mimeType": "image/png", "data": data}}]
        if block.type == "tool_use":
            call: dict[str, Any] = {"name": block.name, "args": block.input}
            if block.id is not None:
                call["id"] = block.id
            return [{"functionCall": call}]
        texts = list(self.reply.pieces(block.text)) if streaming else [block.text]
        extra = {"thought": True} if block.type == "thinking" else {}
        return [{"text": piece, **extra} for piece in texts if piece]

    def usage(self, final: bool) -> dict[str, Any]:
        prompt = self.reply.input_tokens
        if not final:
            return {"promptTokenCount": prompt, "totalTokenCount": prompt}
        out = self.reply.usage_out()
        candidates = out if self.reply.output_tokens is not None else out - self.thoughts
        usage = {"promptTokenCount": prompt, "candidatesTokenCount": candidates}
        if self.thoughts:
            usage["thoughtsTokenCount"] = self.thoughts
        usage["totalTokenCount"] = prompt + candidates + self.thoughts
        return usage

    def chunk(self, parts: list[dict[str, Any]], final: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if final:
            candidate["finishReason"] = FINISH_REASONS[self.reply.final_stop]
        return {
            "candidates": [candidate],
            "usageMetadata": self.usage(final),
            "modelVersion": self.model,
            "responseId": self.response_id,
        }

    def whole(self, headers: dict[str, str]) -> Response:
        """A non-streaming reply; a mid-stream fault becomes its nearest equivalent."""
        parts = self.parts(False) or [{"text": ""}]
        return whole_response(self.reply, self.chunk(parts, True), headers, _error)

    async def stream(self, clock: ReplyClock) -> AsyncIterator[bytes]:
        reply, fault = self.reply, self.reply.fault
        parts = self.parts(True)
        fires = fault is not None and fault.kind != "http_error"
        at = min(fault.after_deltas, len(parts)) if fault is not None and fires else -1
        if not parts and not fires:
            parts = [{"text": ""}]  # an empty reply still has a final event
        for sent, part in enumerate(parts):
            if sent == at:
                break
            for raw in reply.raw_due(sent, end=sent == len(parts) - 1):
                yield raw_event(raw, "\r\n")
            empty = sse(self.chunk([{"text": ""}], False), newline="\r\n")  # a keep-alive
            async for beat in paced(reply, sent, empty, clock):
                yield beat
            final = sent == len(parts) - 1 and at != len(parts)
            yield sse(self.chunk([part], final), newline="\r\n")
        if fault is None or not fires:
            return
        if fault.kind == "drop":
            raise DropConnection
        if fault.kind == "error_event":
            yield sse(error_body(fault.status, fault.message), newline="\r\n")
        else:
            yield b"data: {not json\r\n\r\n"


def invalid_request(body: Any) -> str | None:
    """What the real API would reject in this body with a 400, if anything."""
    if not isinstance(body, dict):
        return "Invalid JSON payload received: the body must be a JSON object"
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "* GenerateContentRequest.contents: contents is not specified"
    for n, content in enumerate(contents):
        where = f"* GenerateContentRequest.contents[{n}]"
        if pick(content, "role") not in (None, "user", "model"):
            return f"{where}.role: Please use a valid role: user, model."
        if not pick(content, "parts"):
            return f"{where}.parts: contents.parts must not be empty."
    generation = pick(body, "generationConfig", "generation_config") or {}
    stops = pick(generation, "stopSequences", "stop_sequences") or []
    if len(stops) > MAX_STOP_SEQUENCES:
        return (
            "* GenerateContentRequest.generation_config.stop_sequences: "
            f"at most {MAX_STOP_SEQUENCES} stop sequences are allowed"
        )
    return None

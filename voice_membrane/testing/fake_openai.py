"""A fake OpenAI API (Chat Completions, legacy Completions, Images) on loopback.

``FakeOpenAI`` answers ``POST /v1/chat/completions`` and ``POST /v1/completions``
in the real wire protocol — ``data: {chunk}`` lines ending in ``data: [DONE]``,
or a whole object when not streaming — so the official ``openai`` SDK, or any
app built on it (or on an OpenAI-compatible server), runs against it unchanged::

    from openai import AsyncOpenAI
    from voice_membrane.testing.fake_openai import FakeOpenAI
    from voice_membrane.testing.script import ScriptedReply, thinking, tool_use

    weather = tool_use("get_weather", {"city": "Paris"})
    with FakeOpenAI(
        ScriptedReply.of(thinking("Weather?"), "Let me check.", weather, delta_delay_s=0.01),
        ScriptedReply.http_error(429, retry_after=1),
    ) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="fake-key", max_retries=0)
        ...  # or run a subprocess with env={**os.environ, **server.env()}
        assert server.requests[0].body["model"] == "gpt-x"

Thinking blocks stream as ``delta.reasoning_content`` (DeepSeek, vLLM) or, with
``reasoning_field="reasoning"``, as ``delta.reasoning`` (OpenRouter). Legacy
Completions stream the script's text blocks joined as the raw text; with
``leak_stop=True`` the matched stop string is appended to it, as some backends
do, and ``stop_field`` names an extra choice field that reports it (vLLM's
``"stop_reason"``, llama.cpp's ``"stopping_word"``). Like the real API the
fake rejects (400) more than 4 stop sequences and a ``tool`` message that
answers no earlier tool call.

``POST /v1/images/generations`` serves the next reply's ``image`` block
(``script.image``): streamed (``"stream": true``) as ``partial_images``
``image_generation.partial_image`` events — grey PNGs of the image's size, made
in code — then ``image_generation.completed`` with the scripted PNG; or whole
(``{"data": [{"b64_json", "revised_prompt"}]}``). Replies are served in order; with none left the
fake answers 500. Streams the client closes early are counted in
``cancelled_streams``.
"""

from __future__ import annotations

import base64
import itertools
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .fake_server import (
    DropConnection,
    FakeServer,
    ReplyClock,
    paced,
    pause,
    raw_event,
    sse,
    whole_response,
)
from .png import read_png, solid_png
from .script import ScriptBlock, ScriptedReply

ERRORS: dict[int, tuple[str, str | None]] = {  # status → (error type, code)
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", "overloaded"),
}
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "stop"}


def error_body(status: int, message: str) -> dict[str, Any]:
    """OpenAI's error JSON for a status (also the data of an in-stream error)."""
    default = ("server_error" if status >= 500 else "invalid_request_error", None)
    kind, code = ERRORS.get(status, default)
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class FakeOpenAI(FakeServer):
    vendor = "openai"

    def __init__(
        self,
        *replies: ScriptedReply,
        reasoning_field: Literal["reasoning_content", "reasoning"] = "reasoning_content",
        leak_stop: bool = False,
        stop_field: str | None = None,
    ) -> None:
        super().__init__(*replies)
        self.reasoning_field = reasoning_field
        self.leak_stop, self.stop_field = leak_stop, stop_field
        self._ids = itertools.count(1)
        self._tool_ids = itertools.count(1)

    def routes(self) -> list[Route]:
        return [
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/completions", self._completions, methods=["POST"]),
            Route("/v1/images/generations", self._images, methods=["POST"]),
        ]

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"

    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": "fake-key"}

    # ------------------------------------------------------------ the endpoints

    async def _chat(self, request: Request) -> Response:
        return await self._serve(request, chat=True)

    async def _completions(self, request: Request) -> Response:
        return await self._serve(request, chat=False)

    async def _serve(self, request: Request, *, chat: bool) -> Response:
        body = await self.record(request)
        clock = ReplyClock(anyio.current_time())  # the deltas' deadlines
        n = next(self._ids)
        headers = {"x-request-id": f"req_fake_{n}"}
        if not request.headers.get("authorization"):
            return _error(401, "You didn't provide an API key.", headers)
        problem = invalid_request(body, chat=chat)
        if problem is not None:
            return _error(400, problem, headers)
        reply = await self.take_reply(request, headers, _error)
        if isinstance(reply, Response):
            return reply
        head = {"id": f"{'chatcmpl' if chat else 'cmpl'}-fake-{n}", "created": int(time.time())}
        head["model"] = body.get("model", "gpt-fake")
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            pieces = self._chat_deltas(reply) if chat else self._text_deltas(reply, body)
            events = self._events(reply, head, pieces, clock, chat=chat, usage=usage, body=body)
            return self.stream(events, headers)
        whole = self._chat_whole(reply) if chat else self._text_whole(reply, body)
        return _whole(reply, {**head, **whole}, headers)

    # ------------------------------------------------------------ images

    async def _images(self, request: Request) -> Response:
        body = await self.record(request)
        headers = {"x-request-id": f"req_fake_{next(self._ids)}"}
        if not request.headers.get("authorization"):
            return _error(401, "You didn't provide an API key.", headers)
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
            return _error(400, "Missing required parameter: 'prompt'.", headers)
        partials = body.get("partial_images") or 0
        if not isinstance(partials, int) or not 0 <= partials <= 3:
            return _error(400, "Invalid 'partial_images': expected an integer 0 to 3.", headers)
        reply = await self.take_reply(request, headers, _error)
        if isinstance(reply, Response):
            return reply
        block = next((b for b in reply.blocks if b.type == "image"), None)
        if block is None:
            return _error(500, "the scripted reply has no image block", headers)
        meta = {
            "created_at": int(time.time()),
            "background": "opaque",
            "output_format": "png",
            "quality": body.get("quality") or "medium",
            "size": body.get("size") or "1024x1024",
        }
        if not body.get("stream"):
            data = {"b64_json": base64.b64encode(block.image).decode()}
            if block.text:
                data["revised_prompt"] = block.text
            whole = {"created": meta["created_at"], "data": [data], "usage": _image_usage()}
            return whole_response(reply, whole, headers, _error)
        return self.stream(self._image_events(reply, block, partials, meta), headers)

    async def _image_events(
        self, reply: ScriptedReply, block: ScriptBlock, partials: int, meta: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        width, height, _ = read_png(block.image)
        fault = reply.fault
        for n in range(partials):
            if fault is not None and fault.kind == "drop" and fault.after_deltas == n:
                raise DropConnection
            await pause(reply.ttft_s if n == 0 else reply.delta_delay_s)
            grey = 60 + 40 * n  # each partial a lighter grey: their order can be seen
            data = base64.b64encode(solid_png(width, height, (grey, grey, grey))).decode()
            kind = "image_generation.partial_image"
            event = {"type": kind, "b64_json": data, "partial_image_index": n, **meta}
            yield sse(event, kind)
        if fault is not None and fault.kind == "drop":
            raise DropConnection
        if fault is not None and fault.kind == "error_event":
            yield sse(error_body(fault.status, fault.message), "error")
            return
        await pause(reply.delta_delay_s)
        data = base64.b64encode(block.image).decode()
        kind = "image_generation.completed"
        extra = {"revised_prompt": block.text} if block.text else {}
        yield sse({"type": kind, "b64_json": data, **meta, "usage": _image_usage(), **extra}, kind)

    # ------------------------------------------------------------ chat

    def _tool_calls(self, reply: ScriptedReply) -> list[tuple[str, str, str]]:
        """(id, name, arguments JSON) of each tool_use block, ids generated once."""
        calls = []
        for block in reply.blocks:
            if block.type == "tool_use":
                call_id = block.id or f"call_fake_{next(self._tool_ids)}"
                calls.append((call_id, block.name, json.dumps(block.input)))
        return calls

    def _chat_deltas(self, reply: ScriptedReply) -> Iterator[tuple[dict[str, Any], bool]]:
        """(delta, counts as a content delta) for each block of the script, in order."""
        calls = iter(self._tool_calls(reply))
        index = 0
        for block in reply.blocks:
            if block.type == "text":
                yield from (({"content": p}, True) for p in reply.pieces(block.text))
            elif block.type == "thinking":
                field: str = self.reasoning_field
                yield from (({field: p}, True) for p in reply.pieces(block.text))
            elif block.type == "tool_use":
                call_id, name, arguments = next(calls)
                function = {"name": name, "arguments": ""}
                yield {"tool_calls": [_call(index, id=call_id, function=function)]}, False
                for piece in reply.pieces(arguments):
                    yield {"tool_calls": [_call(index, function={"arguments": piece})]}, True
                index += 1

    def _chat_whole(self, reply: ScriptedReply) -> dict[str, Any]:
        text = "".join(b.text for b in reply.blocks if b.type == "text")
        message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
        reasoning = "".join(b.text for b in reply.blocks if b.type == "thinking")
        if reasoning:
            message[self.reasoning_field] = reasoning
        calls = self._tool_calls(reply)
        if calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
                for i, name, args in calls
            ]
        choice = {"index": 0, "message": message, "logprobs": None}
        return {"object": "chat.completion", "choices": [choice], "finish": _finish(reply, True)}

    # ------------------------------------------------------------ legacy completions

    def _raw_text(self, reply: ScriptedReply, body: dict[str, Any]) -> tuple[str, str | None]:
        """The completion's text (with a leaked stop when so configured) and the stop."""
        text = "".join(b.text for b in reply.blocks if b.type == "text")
        stop = None
        if reply.final_stop == "stop_sequence":
            stops = body.get("stop")
            first = stops if isinstance(stops, str) else (stops or [None])[0]
            stop = reply.stop_sequence or first
        if self.leak_stop and stop:
            text += stop
        return text, stop

    def _text_deltas(
        self, reply: ScriptedReply, body: dict[str, Any]
    ) -> Iterator[tuple[dict[str, Any], bool]]:
        text, _ = self._raw_text(reply, body)
        yield from (({"text": piece}, True) for piece in reply.pieces(text))

    def _text_whole(self, reply: ScriptedReply, body: dict[str, Any]) -> dict[str, Any]:
        text, stop = self._raw_text(reply, body)
        choice = {"text": text, "index": 0, "logprobs": None, **self._stop_extra(stop)}
        return {"object": "text_completion", "choices": [choice], "finish": _finish(reply, False)}

    def _stop_extra(self, stop: str | None) -> dict[str, Any]:
        return {self.stop_field: stop} if self.stop_field and stop else {}

    # ------------------------------------------------------------ the stream

    async def _events(
        self,
        reply: ScriptedReply,
        head: dict[str, Any],
        deltas: Iterator[tuple[dict[str, Any], bool]],
        clock: ReplyClock,
        *,
        chat: bool,
        usage: bool,
        body: dict[str, Any],
    ) -> AsyncIterator[bytes]:
        fault = reply.fault
        sent = 0  # content deltas so far
        head = {**head, "object": "chat.completion.chunk" if chat else "text_completion"}
        extra: dict[str, Any] = {"usage": None} if usage else {}

        def chunk(choice: dict[str, Any]) -> bytes:
            choice = {"index": 0, **choice, "logprobs": None}
            if "finish_reason" not in choice:
                choice["finish_reason"] = None
            return sse({**head, "choices": [choice], **extra})

        def faulted() -> bytes | None:
            """The fault's bytes if it fires now (DropConnection is raised)."""
            if fault is None or fault.kind == "http_error" or sent != fault.after_deltas:
                return None
            if fault.kind == "drop":
                raise DropConnection
            if fault.kind == "error_event":
                return sse(error_body(fault.status, fault.message))
            return b"data: {not json\n\n"

        if chat:
            yield chunk({"delta": {"role": "assistant", "content": "", "refusal": None}})
        for delta, counts in deltas:
            if counts:
                if (bad := faulted()) is not None:
                    yield bad
                    return
                for raw in reply.raw_due(sent):
                    yield raw_event(raw)
                # A keep-alive as some servers send one: a chunk with nothing in it.
                empty = chunk({"delta": {"content": ""}} if chat else {"text": ""})
                async for beat in paced(reply, sent, empty, clock):
                    yield beat
                sent += 1
            yield chunk({"delta": delta} if chat else delta)
        if (bad := faulted()) is not None:
            yield bad
            return
        for raw in reply.raw_due(sent, end=True):
            yield raw_event(raw)
        finish = _finish(reply, chat)
        if chat:
            yield chunk({"delta": {}, "finish_reason": finish})
        else:
            _, stop = self._raw_text(reply, body)
            yield chunk({"text": "", "finish_reason": finish, **self._stop_extra(stop)})
        if usage:
            yield sse({**head, "choices": [], "usage": _usage(reply)})
        yield sse("[DONE]")


def _call(index: int, **fields: Any) -> dict[str, Any]:
    return {"index": index, **({"type": "function"} if "id" in fields else {}), **fields}


def _finish(reply: ScriptedReply, chat: bool) -> str:
    if chat and reply.final_stop == "tool_use":
        return "tool_calls"
    return FINISH[reply.final_stop]


def _usage(reply: ScriptedReply) -> dict[str, Any]:
    out = reply.usage_out()
    reasoning = sum(len(list(reply.pieces(b.text))) for b in reply.blocks if b.type == "thinking")
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": out,
        "total_tokens": reply.input_tokens + out,
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def _image_usage() -> dict[str, Any]:
    details = {"image_tokens": 0, "text_tokens": 12}
    return {
        "input_tokens": 12,
        "input_tokens_details": details,
        "output_tokens": 272,
        "total_tokens": 284,
    }


def _error(status: int, message: str, headers: dict[str, str]) -> JSONResponse:
    return JSONResponse(error_body(status, message), status_code=status, headers=headers)


def _whole(reply: ScriptedReply, whole: dict[str, Any], headers: dict[str, str]) -> Response:
    whole["choices"][0]["finish_reason"] = whole.pop("finish")
    whole["usage"] = _usage(reply)
    return whole_response(reply, whole, headers, _error)


def invalid_request(body: Any, *, chat: bool) -> str | None:
    """What the real API would reject in this body with a 400, if anything."""
    if not isinstance(body, dict):
        return "We could not parse the JSON body of your request."
    required = "messages" if chat else "prompt"
    for key in ("model", required):
        if key not in body:
            return f"Missing required parameter: '{key}'."
    stop = body.get("stop")
    if isinstance(stop, list) and len(stop) > 4:
        return (
            "Invalid 'stop': array too long. Expected an array with maximum length 4, "
            f"but got an array with length {len(stop)} instead."
        )
    if not chat:
        return None
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "Invalid 'messages': empty array. Expected an array with minimum length 1."
    called: set[str] = set()
    for n, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"Invalid type for 'messages[{n}]': expected an object."
        for call in message.get("tool_calls") or []:
            called.add(call.get("id"))
        if message.get("role") == "tool" and message.get("tool_call_id") not in called:
            return (
                f"Invalid parameter: messages with role 'tool' must be a response to a "
                f"preceeding message with 'tool_calls' (messages[{n}])."
            )
    return None

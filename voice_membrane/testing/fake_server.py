"""The loopback server every fake provider runs on.

A ``FakeServer`` serves a Starlette app with uvicorn on 127.0.0.1 (a free
port) in a thread of its own, so any client — an async test, a sync test, or a
``voice-membrane`` subprocess given the base URL — can talk to it. Replies are
taken from a queue of ``ScriptedReply`` in order; every request received is
recorded (path, headers, JSON body) for assertions.

Use it as a context manager::

    with FakeAnthropic(ScriptedReply.of("Hello.")) as server:
        client = AsyncAnthropic(base_url=server.base_url, api_key="k", max_retries=0)
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute
from starlette.types import Send

from .loopback import LoopbackApp
from .script import RawEvent, ScriptedReply

# A vendor's error response: (HTTP status, message, headers) → its JSON error body.
ErrorResponse = Callable[[int, str, dict[str, str]], Response]


class DropConnection(Exception):
    """Raised inside a streaming body: the server closes the connection there."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # parsed JSON (None when the body was empty)
    peer: str | None = None  # the client's "host:port": one per TCP connection


class FakeServer(LoopbackApp):
    """Base class: subclasses give ``routes()`` and ``base_url``."""

    vendor = "fake"

    def __init__(self, *replies: ScriptedReply) -> None:
        self._replies: deque[ScriptedReply] = deque(replies)
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.cancelled_streams = 0  # streams the client closed before their end
        self.abandoned_requests = 0  # ``hang`` requests the client gave up on
        self.generation = 0  # bumped by reset()
        super().__init__(f"{self.vendor}-fake")

    # ------------------------------------------------------------ scripting

    def add(self, *replies: ScriptedReply) -> None:
        """Queue more replies (served in order, one per request)."""
        with self._lock:
            self._replies.extend(replies)

    async def take_reply(
        self, request: Request, headers: dict[str, str], error: ErrorResponse
    ) -> ScriptedReply | Response:
        """The next scripted reply, or the response that stands for it: no reply
        left, a ``hang``, or the reply's scripted HTTP error."""
        reply = self.next_reply()
        if reply is None:
            return self.no_reply_left()
        if reply.fault is not None and reply.fault.kind == "hang":
            return await self.hang(request)
        refused = scripted_http_error(reply, headers, error)
        return refused if refused is not None else reply

    def next_reply(self) -> ScriptedReply | None:
        with self._lock:
            return self._replies.popleft() if self._replies else None

    def reset(self) -> None:
        """Forget queued replies, recorded requests and counts: one server can then
        serve a whole test module (starting one costs ~0.15 s)."""
        with self._lock:
            self._replies.clear()
            self.requests.clear()
            self.cancelled_streams = 0
            self.abandoned_requests = 0
            # A stream of the test before may be found cancelled only now: it is
            # not this test's (counts are per generation).
            self.generation += 1
        self.reset_ids()

    def reset_ids(self) -> None:
        """Subclasses restart the ids they generate here."""

    def stream(
        self,
        events: AsyncIterator[bytes],
        headers: dict[str, str],
        media_type: str = "text/event-stream",
    ) -> StreamingResponse:
        """A streamed response (SSE by default) that counts a stream the client
        closed before its end."""
        return _CountedStream(self, events, headers, media_type)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    async def record(self, request: Request) -> Any:
        """Record a request; return its JSON body (None if empty or not JSON)."""
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        with self._lock:
            self.requests.append(
                RecordedRequest(
                    request.method,
                    request.url.path,
                    dict(request.query_params),
                    {k.lower(): v for k, v in request.headers.items()},
                    body,
                    f"{request.client.host}:{request.client.port}" if request.client else None,
                )
            )
        return body

    async def hang(self, request: Request) -> Response:
        """Answer nothing until the client gives up and disconnects (``hang`` fault)."""
        generation = self.generation
        while not await request.is_disconnected():
            await anyio.sleep(0.02)
        with self._lock:
            if generation == self.generation:
                self.abandoned_requests += 1
        return Response(status_code=504)  # goes nowhere: the client has gone

    @staticmethod
    def no_reply_left() -> JSONResponse:
        return JSONResponse(
            {"error": {"type": "fake_server_error", "message": "no scripted reply left"}},
            status_code=500,
        )

    # ------------------------------------------------------------ for subclasses

    def routes(self) -> Sequence[BaseRoute]:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return self.origin

    def env(self) -> dict[str, str]:
        """Environment variables that point the vendor's SDK at this server."""
        return {}

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------ lifecycle

    def app(self) -> Starlette:
        return Starlette(routes=self.routes())


class _CountedStream(StreamingResponse):
    """Starlette cancels the response when the client disconnects; the cancellation
    lands in the body generator (while it waits between deltas) or in ``send``, so
    it is caught around both, counted, and let go on."""

    def __init__(
        self,
        server: FakeServer,
        events: AsyncIterator[bytes],
        headers: dict[str, str],
        media_type: str,
    ) -> None:
        super().__init__(events, media_type=media_type, headers=headers)
        self._server = server
        self._generation = server.generation

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        except anyio.get_cancelled_exc_class():
            with self._server._lock:
                if self._generation == self._server.generation:
                    self._server.cancelled_streams += 1
            raise


async def pause(seconds: float) -> None:
    if seconds > 0:
        await anyio.sleep(seconds)


class ReplyClock:
    """When a streamed reply's content deltas are due: its TTFT after
    ``arrived`` (the request read whole, as a service's time to first token
    counts), then one every ``delta_delay_s``, each pause moving the rest on by
    its length. Deadlines, not sleeps one after another, so the fake keeps its
    scripted times however late its loop wakes (sleeps in a row would add each
    wake-up's lateness to every later delta); and from the request's arrival,
    not from the stream's first event, so the fake's own handling under load
    (its headers and first event sent through a busy loop) is inside its TTFT,
    not added to it."""

    def __init__(self, arrived: float) -> None:
        self._due = arrived

    def next(self, reply: ScriptedReply, sent: int) -> float:
        """The deadline of content delta number ``sent`` (called in order)."""
        self._due += reply.ttft_s if sent == 0 else reply.delta_delay_s
        return self._due

    def hold(self, seconds: float) -> float:
        """A pause's end, from the last deadline (the rest move on by it)."""
        self._due += seconds
        return self._due


async def paced(
    reply: ScriptedReply, sent: int, keepalive: bytes, clock: ReplyClock
) -> AsyncIterator[bytes]:
    """The wait before content delta number ``sent``: until ``clock``'s deadline
    for it, then its pauses there, each yielding ``keepalive`` every
    ``keepalive_s`` if it asks for it. A client that gives up cancels the wait
    (``_CountedStream``)."""
    await anyio.sleep_until(clock.next(reply, sent))
    for held in reply.pauses_at(sent):
        end = clock.hold(held.seconds)
        if held.keepalive_s is None:
            await anyio.sleep_until(end)
            continue
        while (left := end - anyio.current_time()) > 0:
            await anyio.sleep(min(held.keepalive_s, left))
            if anyio.current_time() < end:
                yield keepalive


def sse(data: Any, event: str | None = None, *, newline: str = "\n") -> bytes:
    """One server-sent event: optional ``event:`` line, a ``data:`` line, blank line."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}{newline}" if event else ""
    return f"{head}data: {payload}{newline}{newline}".encode()


def raw_event(raw: RawEvent, newline: str = "\n") -> bytes:
    """A script's raw event on the wire: bytes as they are, else one SSE event."""
    return raw.data if isinstance(raw.data, bytes) else sse(raw.data, raw.event, newline=newline)


class _HttpFault(Protocol):
    """What a scripted HTTP error says (``script.Fault``, ``fake_speech.SpeechFault``)."""

    @property
    def kind(self) -> str: ...
    @property
    def status(self) -> int: ...
    @property
    def retry_after(self) -> float | None: ...
    @property
    def message(self) -> str: ...


class _Faulted(Protocol):
    """A script that may carry a fault (``ScriptedReply``, ``SpeechScript``)."""

    @property
    def fault(self) -> _HttpFault | None: ...


def scripted_http_error(
    script: _Faulted, headers: dict[str, str], error: ErrorResponse
) -> Response | None:
    """The script's HTTP error (with its ``retry-after`` header), if it has one."""
    fault = script.fault
    if fault is None or fault.kind != "http_error":
        return None
    if fault.retry_after is not None:
        headers["retry-after"] = f"{fault.retry_after:g}"
    return error(fault.status, fault.message, headers)


def whole_response(
    reply: ScriptedReply, payload: Any, headers: dict[str, str], error: ErrorResponse
) -> Response:
    """A non-streaming reply; a mid-stream fault becomes its nearest equivalent: an
    error event the error response, a malformed line a body that is not JSON, a drop
    half the body and then the connection closed."""
    fault = reply.fault
    if fault is None:
        return JSONResponse(payload, headers=headers)
    if fault.kind == "error_event":
        return error(fault.status, fault.message, headers)
    if fault.kind == "malformed":
        return Response("{not json", media_type="application/json", headers=headers)
    text = json.dumps(payload)

    async def cut() -> AsyncIterator[bytes]:
        yield text[: len(text) // 2].encode()
        raise DropConnection

    return StreamingResponse(cut(), media_type="application/json", headers=headers)

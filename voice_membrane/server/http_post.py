"""One HTTP POST (or its CORS preflight, OPTIONS) on the port websockets
serves (sans-I/O, over h11).

websockets' handshake parser takes GET only; a WebRTC offer is POSTed (WHIP,
Pipecat's small WebRTC transport), after an OPTIONS when the page is on another
origin. ``PostIntake`` reads the bytes of one such request — its headers
bounded, its body at most ``max_body`` bytes — and gives the request (as
websockets' ``Request``, so the port's Host, Origin and token checks read it as
they read an upgrade) with its body, or the response that refuses it.
``reply_bytes`` writes a response with the port's security headers; the
connection then closes (one request per connection).
"""

from __future__ import annotations

from dataclasses import dataclass

import h11
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from .http_routes import response

MAX_HEADER_BYTES = 16 * 1024
REQUEST_PREFIXES = (b"POST ", b"OPTIONS ")  # what websockets cannot parse


@dataclass(frozen=True)
class Posted:
    request: Request  # (method "POST" or "OPTIONS")
    body: bytes


class PostIntake:
    """Feed the connection's bytes; ``feed`` returns None until the request is
    whole (``Posted``) or refused (a ``Response``), then nothing more is read."""

    def __init__(self, max_body: int) -> None:
        self.max_body = max_body
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        self._request: h11.Request | None = None
        self._body = bytearray()

    def feed(self, data: bytes) -> Posted | Response | None:
        try:
            self._h11.receive_data(data)
            while True:
                event = self._h11.next_event()
                if event is h11.NEED_DATA:
                    return None
                if isinstance(event, h11.Request):
                    refusal = self._head(event)
                    if refusal is not None:
                        return refusal
                    self._request = event
                elif isinstance(event, h11.Data):
                    self._body += event.data
                    if len(self._body) > self.max_body:
                        return _too_big(self.max_body)
                elif isinstance(event, h11.EndOfMessage):
                    return self._posted()
                elif isinstance(event, h11.ConnectionClosed):
                    return response(400, "the request ended before its body\n")
                else:  # h11.PAUSED cannot come before the end of the first request
                    return response(400, "one request per connection\n")
        except h11.RemoteProtocolError as exc:
            return response(exc.error_status_hint, f"bad HTTP request: {exc}\n")

    def _head(self, request: h11.Request) -> Response | None:
        if request.method not in (b"POST", b"OPTIONS"):  # (GET is websockets' to read)
            return response(405, "only GET, POST and OPTIONS are served\n")
        for name, value in request.headers:
            if name == b"content-length" and int(value) > self.max_body:
                return _too_big(self.max_body)
            if name == b"transfer-encoding":
                return response(411, "send the body with a Content-Length\n")
        return None

    def _posted(self) -> Posted | Response:
        assert self._request is not None
        try:
            path = self._request.target.decode("ascii")
            headers = Headers(
                (name.decode("ascii"), value.decode("latin-1"))
                for name, value in self._request.headers
            )
        except UnicodeDecodeError:
            return response(400, "a non-ASCII path or header name\n")
        method = self._request.method.decode("ascii")
        return Posted(Request(path, headers, method=method), bytes(self._body))


def reply_bytes(reply: Response) -> bytes:
    """The response on the wire (HTTP/1.1, then the connection closes)."""
    head = [f"HTTP/1.1 {reply.status_code} {reply.reason_phrase}"]
    for name, value in reply.headers.raw_items():
        head.append(f"{name}: {value}")
    head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body


def _too_big(limit: int) -> Response:
    return response(413, f"the body is over {limit} bytes\n")

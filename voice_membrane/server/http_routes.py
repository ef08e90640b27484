"""The plain HTTP side of the port: the page, its static files, health and metrics.

``route`` answers a request that is not a WebSocket upgrade to ``/v1/session``
(or refuses an upgrade from an origin that is not allowed). It returns None
to let the WebSocket handshake go on. Every response of the port carries
``SECURITY_HEADERS`` (``SecureConnection`` adds them to the ones websockets
writes itself).
"""

from __future__ import annotations

import email.utils
import http
import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers, MultipleValuesError
from websockets.http11 import Request, Response
from websockets.server import ServerProtocol

from .protocol import SESSION_PATH

STATIC_DIR = Path(__file__).resolve().parent / "static"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".wasm": "application/wasm",
}
# One plain file name: no folders, no leading dot, so no way out of STATIC_DIR.
_STATIC_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}")
PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The page loads its script, worklet and style from its own origin and nothing
# from elsewhere: no inline script or style, images only as data: URLs (the
# favicon, generated images), the WebSocket to the same origin (CSP 3's 'self'
# covers ws: and wss:), and no page may frame it.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),  # /metrics is no other site's resource
)


def response(
    status: int, body: bytes | str, content_type: str = "text/plain; charset=utf-8"
) -> Response:
    data = body.encode() if isinstance(body, str) else body
    status_ = http.HTTPStatus(status)
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Content-Length", str(len(data))),
            ("Content-Type", content_type),
            ("Cache-Control", "no-store"),
            *SECURITY_HEADERS,
        ]
    )
    return Response(status_.value, status_.phrase, headers, data)


def secure(response: Response) -> Response:
    """Add the security headers a response lacks (websockets' own 426, 414, 431, 503)."""
    if response.status_code != 101:  # a WebSocket upgrade is no page
        for name, value in SECURITY_HEADERS:
            if name not in response.headers:
                response.headers[name] = value
    return response


class SecureConnection(ServerConnection):
    """A connection whose every HTTP response is ``secure``: the protocol's
    ``send_response`` is the one place all of them pass, including the ones
    websockets makes while parsing, before any hook runs."""

    def __init__(self, protocol: ServerProtocol, *args: Any, **kwargs: Any) -> None:
        super().__init__(protocol, *args, **kwargs)
        send = protocol.send_response
        protocol.send_response = lambda response: send(secure(response))  # type: ignore[method-assign]


def static_file(name: str, folder: Path = STATIC_DIR) -> Response:
    if not _STATIC_NAME.fullmatch(name) or ".." in name:
        return response(404, "not found\n")
    path = folder / name
    content_type = CONTENT_TYPES.get(path.suffix.lower())
    if content_type is None or not path.is_file():
        return response(404, "not found\n")
    return response(200, path.read_bytes(), content_type)


def origin_allowed(
    request: Request, allowed: Collection[str], own: Callable[[str], bool] = lambda _: False
) -> bool:
    """A request with no Origin (not a browser) passes; a browser's must be
    allowed, or ``own`` (one of the server's own names)."""
    try:
        origin = request.headers.get("Origin")
    except MultipleValuesError:
        return False
    if origin is None:
        return True
    origin = origin.rstrip("/").lower()
    return origin in allowed or own(origin)


def route(
    request: Request,
    *,
    allowed_origins: Collection[str],
    own_origin: Callable[[str], bool] = lambda _: False,
    ready: Callable[[], bool],
    metrics: Callable[[], bytes],
    static_dir: Path = STATIC_DIR,
) -> Response | None:
    path = request.path.partition("?")[0]
    if path == SESSION_PATH:
        if not origin_allowed(request, allowed_origins, own_origin):
            return response(403, "origin not allowed\n")
        return None  # the WebSocket handshake (it answers 426 to a plain GET)
    if path == "/healthz":
        return response(200, "ok\n")
    if path == "/readyz":
        return response(200, "ready\n") if ready() else response(503, "draining\n")
    if path == "/metrics":
        return response(200, metrics(), PROMETHEUS_TYPE)
    if path in ("/", "/index.html"):
        return static_file("index.html", static_dir)
    if path.startswith("/static/"):
        return static_file(path.removeprefix("/static/"), static_dir)
    return response(404, "not found\n")

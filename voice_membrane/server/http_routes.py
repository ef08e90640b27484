"""The plain HTTP side of the port: the page, its static files, health and metrics.

``route`` answers a request that is not a WebSocket upgrade to ``/v1/session``
(or refuses an upgrade from an origin that is not allowed). It returns None
to let the WebSocket handshake go on.
"""

from __future__ import annotations

import email.utils
import http
import re
from collections.abc import Callable, Collection
from pathlib import Path

from websockets.datastructures import Headers, MultipleValuesError
from websockets.http11 import Request, Response

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
            ("X-Content-Type-Options", "nosniff"),
        ]
    )
    return Response(status_.value, status_.phrase, headers, data)


def static_file(name: str, folder: Path = STATIC_DIR) -> Response:
    if not _STATIC_NAME.fullmatch(name) or ".." in name:
        return response(404, "not found\n")
    path = folder / name
    content_type = CONTENT_TYPES.get(path.suffix.lower())
    if content_type is None or not path.is_file():
        return response(404, "not found\n")
    return response(200, path.read_bytes(), content_type)


def origin_allowed(request: Request, allowed: Collection[str]) -> bool:
    """A request with no Origin (not a browser) passes; a browser's must be allowed."""
    try:
        origin = request.headers.get("Origin")
    except MultipleValuesError:
        return False
    return origin is None or origin.rstrip("/").lower() in allowed


def route(
    request: Request,
    *,
    allowed_origins: Collection[str],
    ready: Callable[[], bool],
    metrics: Callable[[], bytes],
    static_dir: Path = STATIC_DIR,
) -> Response | None:
    path = request.path.partition("?")[0]
    if path == SESSION_PATH:
        if not origin_allowed(request, allowed_origins):
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

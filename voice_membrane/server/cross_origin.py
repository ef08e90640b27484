"""CORS for the WebRTC offer: a page on another origin may POST it.

A browser sends a cross-origin ``POST`` with ``Content-Type: application/sdp``
(or JSON) and an ``Authorization`` header only after a preflight ``OPTIONS``
to the same path, and lets the page read the answer only when it names the
page's origin. Only the origins given with ``--allow-origin`` get either: the
server's own origin needs no CORS, and no wildcard is ever sent. No cookies
are read anywhere, so no credentials are allowed. Sans-I/O: a request in, a
response or headers out.
"""

from __future__ import annotations

from collections.abc import Collection

from websockets.datastructures import MultipleValuesError
from websockets.http11 import Request, Response

from .http_routes import response

ALLOWED_METHODS = "POST"
ALLOWED_HEADERS = "Authorization, Content-Type"
PREFLIGHT_MAX_AGE_S = 600  # a browser asks again at most every ten minutes


def listed_origin(request: Request, allowed: Collection[str]) -> str | None:
    """The request's Origin as sent, when it is one of ``allowed`` (lowercase, no slash)."""
    try:
        origin = request.headers.get("Origin")
    except MultipleValuesError:
        return None
    if origin is None or origin.rstrip("/").lower() not in allowed:
        return None
    return origin


def preflight(request: Request, allowed: Collection[str], path: str) -> Response:
    """The answer to ``OPTIONS``: the offer's methods and headers for a listed
    origin, 403 for any other, 404 for any other path."""
    if request.path.partition("?")[0] != path:
        return response(404, "not found\n")
    origin = listed_origin(request, allowed)
    if origin is None:
        return response(403, "origin not allowed\n")
    reply = response(204, b"")
    del reply.headers["Content-Type"]
    reply.headers["Access-Control-Allow-Methods"] = ALLOWED_METHODS
    reply.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
    reply.headers["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE_S)
    return readable_by(reply, origin)


def readable_by(reply: Response, origin: str | None) -> Response:
    """``reply``, readable by a page of ``origin`` (a listed one) when there is one:
    the refusals too, so the page can tell a 401 from a 503."""
    if origin is not None:
        reply.headers["Access-Control-Allow-Origin"] = origin
    reply.headers["Vary"] = "Origin"  # (a cache must not give one origin's answer to another)
    return reply

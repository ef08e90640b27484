"""A cloud speech-to-text socket's failures as ``SttError``: one mapping for the
engines here (the SDKs raise websockets' and the OS's exceptions as they are).

401/403 are not retryable (a wrong key stays wrong); 429, 5xx, a refused or
dropped connection are, with the service's ``retry-after`` when it sent one.
Messages are redacted: the SDKs' exceptions may carry the request's headers.
"""

from __future__ import annotations

from typing import Any

from websockets.exceptions import ConnectionClosed, ConnectionClosedOK, InvalidHandshake

from ..infra.redact import redact
from ..vendors.errors import retry_after_seconds
from .base import SttError


def status_error(name: str, status: int, headers: Any = None) -> SttError:
    """The upgrade was refused with this HTTP status."""
    retry_after = retry_after_seconds(headers)
    if status in (401, 403):
        return SttError(f"{name}: auth (HTTP {status}): the key was refused")
    if status == 429:
        return SttError(
            f"{name}: rate_limit (HTTP 429): too many requests",
            retryable=True,
            retry_after_s=retry_after,
        )
    if status >= 500:
        return SttError(
            f"{name}: server (HTTP {status}): the service failed",
            retryable=True,
            retry_after_s=retry_after,
        )
    return SttError(f"{name}: bad_request (HTTP {status}): the service refused the request")


def handshake_status(exc: BaseException | None) -> tuple[int, Any] | None:
    """(status, response headers) of a refused WebSocket upgrade, from websockets'
    exception (the new ``InvalidStatus`` or the legacy ``InvalidStatusCode``)."""
    if exc is None:
        return None
    response = getattr(exc, "response", None)
    if response is not None and isinstance(getattr(response, "status_code", None), int):
        return response.status_code, response.headers
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status, getattr(exc, "headers", None)
    return None


def transport_error(name: str, exc: BaseException) -> SttError | None:
    """A refused, failed or dropped connection (retryable), or None when ``exc``
    is not a transport failure."""
    refused = handshake_status(exc)
    if refused is not None:
        return status_error(name, *refused)
    if isinstance(exc, ConnectionClosed):
        code = exc.rcvd.code if exc.rcvd is not None else None
        how = f"closed with code {code}" if code is not None else "dropped"
        reason = f": {exc.rcvd.reason}" if exc.rcvd is not None and exc.rcvd.reason else ""
        return SttError(redact(f"{name}: connection {how}{reason}"), retryable=True)
    if isinstance(exc, InvalidHandshake | OSError | TimeoutError):
        detail = str(exc) or type(exc).__name__
        return SttError(redact(f"{name}: connection failed: {detail}"), retryable=True)
    return None


def socket_error(name: str, exc: BaseException) -> SttError:
    """``exc`` from a service's socket as an ``SttError``: the transport's own
    mapping, else its type only (an SDK's message may quote our request)."""
    return transport_error(name, exc) or SttError(f"{name}: {type(exc).__name__} on the socket")


def closed_normally(exc: BaseException) -> bool:
    """The service closed the socket as it should (the stream simply ended)."""
    return isinstance(exc, ConnectionClosedOK)

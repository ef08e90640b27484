"""The error of a call to a model or a vendor's service, and its HTTP vocabulary.

``ProviderError`` is raised by the LLM providers and by the cloud TTS engines
that share an SDK with them; ``RetryPolicy`` (``retry.py``) judges it.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from ..infra.redact import redact


class LlmError(RuntimeError):
    """The model could not be loaded or failed while generating."""


ErrorKind: TypeAlias = Literal[
    "rate_limit",  # 429
    "overloaded",  # 529 / 503
    "server",  # other 5xx
    "connection",  # could not connect, or the connection dropped
    "timeout",
    "bad_request",  # 400 / 404 / 422: the request itself is wrong
    "auth",  # 401 / 403
    "stream",  # a malformed or failing stream after it began
    "stalled",  # a stream that began and then sent nothing new for too long
]


class ProviderError(LlmError):
    """A provider call failed. ``retryable`` errors (429, 5xx, connection) are
    retried by ``Membrane`` while no output has arrived; after that the reply
    ends with this error and keeps what was produced (a "stalled" stream has
    always produced output, so it is never retried).

    The message is redacted (``redact.py``): it is built from transport errors
    and URLs, which may quote a key, and it is printed and logged."""

    def __init__(
        self,
        provider: str,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        where = f" (HTTP {status})" if status is not None else ""
        message = redact(message)
        super().__init__(f"{provider}: {kind}{where}: {message}")
        self.provider, self.kind, self.detail = provider, kind, message
        self.status, self.retry_after_s = status, retry_after_s

    @property
    def retryable(self) -> bool:
        return self.kind in ("rate_limit", "overloaded", "server", "connection", "timeout")

    def at(self, url: str | None) -> ProviderError:
        """This error naming the server it could not reach (a connection or timeout
        error says nothing of where it was going: a wrong base URL is the usual cause)."""
        if not url or self.kind not in ("connection", "timeout"):
            return self
        return ProviderError(
            self.provider,
            self.kind,
            f"{self.detail} ({url})",
            status=self.status,
            retry_after_s=self.retry_after_s,
        )


def retry_after_seconds(headers: Any) -> float | None:
    """The ``retry-after`` (or ``retry-after-ms``) header in seconds, if present."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            continue  # an HTTP date: rare from these APIs; fall back to backoff
    return None


def status_kind(status: int) -> ErrorKind:
    """The error kind of an HTTP status."""
    if status == 429:
        return "rate_limit"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server"
    if status in (401, 403):
        return "auth"
    if status == 408:
        return "timeout"
    return "bad_request"

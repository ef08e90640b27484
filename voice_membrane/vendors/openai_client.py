"""The OpenAI SDK client and its errors as ``ProviderError``: one construction for
the chat provider, the Images API and the speech engine.
"""

from __future__ import annotations

import json
import os

import httpx2
import openai

from .credentials import unusable_key
from .errors import ErrorKind, ProviderError, retry_after_seconds, status_kind
from .http_pool import pool_limits
from .tls import shared_ssl_context

# What a call through the SDK raises while its stream is read: one mapping to
# ProviderError for the chat adapter and the Images API.
STREAM_ERRORS = (openai.OpenAIError, httpx2.HTTPError, json.JSONDecodeError, UnicodeDecodeError)


NAME = "openai"


KEY_ENV = "OPENAI_API_KEY"


def async_client(
    api_key: str | None, base_url: str | None, timeout: float | httpx2.Timeout
) -> openai.AsyncOpenAI:
    """An SDK client with its own retries off (one policy decides: ``retry.py``);
    ``api_key`` / ``base_url`` default to ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``.
    ``ProviderError`` (auth) for a missing key or one no HTTP header can carry."""
    key = api_key or os.environ.get(KEY_ENV)
    if not key:
        raise ProviderError(NAME, "auth", f"no API key: pass api_key or set {KEY_ENV}")
    problem = unusable_key(NAME, key)
    if problem:
        raise ProviderError(NAME, "auth", problem)
    try:
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=openai.DefaultAsyncHttpxClient(
                verify=shared_ssl_context(), limits=pool_limits()
            ),
        )
    except openai.OpenAIError as exc:
        raise ProviderError(NAME, "bad_request", str(exc)) from exc


def provider_error(exc: BaseException) -> ProviderError:
    """An SDK (or transport) failure as a ``ProviderError``."""
    if isinstance(exc, openai.APIStatusError):
        message = _message(exc.body) or exc.message
        return ProviderError(
            NAME,
            status_kind(exc.status_code),
            message,
            status=exc.status_code,
            retry_after_s=retry_after_seconds(exc.response.headers),
        )
    if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException):
        return ProviderError(NAME, "timeout", "the request timed out")
    if isinstance(exc, openai.APIConnectionError | httpx2.HTTPError):
        cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
        detail = f": {cause}" if cause is not None and str(cause) else ""
        return ProviderError(NAME, "connection", f"connection failed or dropped{detail}")
    if isinstance(exc, openai.APIResponseValidationError):
        return ProviderError(NAME, "stream", f"unexpected response: {exc.message}")
    if isinstance(exc, openai.APIError):  # an error sent inside the stream
        return ProviderError(NAME, stream_error_kind(exc.body), _message(exc.body) or exc.message)
    if isinstance(exc, json.JSONDecodeError):
        return ProviderError(NAME, "stream", f"malformed data (not JSON): {exc.doc[:80]!r}")
    if isinstance(exc, UnicodeDecodeError):  # the SDK decodes each line as UTF-8
        return ProviderError(NAME, "stream", f"malformed data (not UTF-8): {exc.reason}")
    return ProviderError(NAME, "bad_request", str(exc))  # e.g. a client-side OpenAIError


def stream_error_kind(body: object) -> ErrorKind:
    """The kind an in-stream error's ``code`` / ``type`` implies; ``stream`` when
    they say nothing known. OpenRouter sends HTTP codes, OpenAI names."""
    if not isinstance(body, dict):
        return "stream"
    code, kind = body.get("code"), body.get("type")
    number = code if isinstance(code, int) else int(str(code)) if str(code).isdigit() else 0
    if 400 <= number < 600:
        return status_kind(number)
    words = " ".join(str(w) for w in (code, kind) if w)
    if "rate_limit" in words or kind in ("requests", "tokens"):
        return "rate_limit"
    if "overloaded" in words:
        return "overloaded"
    if "server_error" in words or "internal" in words:
        return "server"
    if "timeout" in words:
        return "timeout"
    return "stream"


def _message(body: object) -> str | None:
    """The ``message`` of an OpenAI error body (``{"error": {…}}`` or its inside)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return None

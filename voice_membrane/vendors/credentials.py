"""The key and base URL a cloud provider will use, checked before anything starts.

A key with a line break or a non-ASCII character, or a base URL the HTTP client
cannot use, would otherwise fail deep inside the SDK at the first prompt, with a
traceback that may quote the key. Here each is one ``ValueError`` line that
names where the value came from and never shows a secret.
"""

from __future__ import annotations

import os
import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator

from ..infra.redact import quote, remember

# Where each SDK looks for its key and its base URL.
KEY_VARS = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "elevenlabs": ("ELEVENLABS_API_KEY",),
    "deepgram": ("DEEPGRAM_API_KEY",),
}
BASE_URL_VARS = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
    "gemini": "GOOGLE_GEMINI_BASE_URL",
    "elevenlabs": "ELEVENLABS_BASE_URL",
    "deepgram": "DEEPGRAM_BASE_URL",  # ours: the SDK reads no such variable
}
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# How variables are conventionally named: only such a name is echoed back (a
# mixed-case "name" may be a key pasted into the wrong field).
_CONVENTIONAL_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")


def api_key(kind: str, where: str, api_key_env: str | None, section: str = "llm") -> str | None:
    """The key to pass to the SDK (None: the SDK reads its own variable, which is
    checked here); ``ValueError`` for a missing or unusable key. ``section``: the
    pipeline file's section that holds ``api_key_env`` (llm or tts)."""
    if api_key_env is not None:
        if not _VARIABLE_NAME.fullmatch(api_key_env):
            remember(api_key_env)  # it may be a key put where a variable name belongs
            raise ValueError(
                f"{where}: {section}.api_key_env must name an environment variable "
                "(letters, digits, _), not hold the key"
            )
        echoed = _CONVENTIONAL_NAME.fullmatch(api_key_env) is not None
        variable = api_key_env if echoed else f"the variable {section}.api_key_env names"
        key = os.environ.get(api_key_env)
        if not key:
            said = f"api_key_env names {api_key_env}, which" if echoed else variable
            raise ValueError(f"{where}: {said} is not set")
        remember(key)
        _check_key(key, where, variable)
        return key
    names = [name for name in KEY_VARS[kind] if os.environ.get(name)]
    if not names:
        raise ValueError(
            f"{where}: no API key: set {' or '.join(KEY_VARS[kind])} "
            f"(or name another variable with {section}.api_key_env)"
        )
    for name in names:
        _check_key(os.environ[name], where, name)
    return None


def key_variable(kind: str, api_key_env: str | None, section: str = "llm") -> str:
    """The variable to name in an error about the key: the configured one (echoed
    only when it looks like a variable name, as in ``api_key``), else the SDK's."""
    if api_key_env is None:
        return " or ".join(KEY_VARS[kind])
    if _CONVENTIONAL_NAME.fullmatch(api_key_env):
        return api_key_env
    return f"the variable {section}.api_key_env names"


HTTP_SCHEMES = ("http", "https")
# A service whose SDK speaks HTTP and WebSocket to one host (Deepgram): either
# scheme names it, ws:// as http:// (plain: a proxy or a fake on this machine).
SOCKET_SCHEMES = ("http", "https", "ws", "wss")


def check_base_url(
    kind: str,
    where: str,
    base_url: str | None,
    section: str = "llm",
    schemes: tuple[str, ...] = HTTP_SCHEMES,
) -> None:
    """``ValueError`` if the configured base URL, or else the SDK's variable, is unusable."""
    source, url = f"{section}.base_url", base_url
    if url is None:
        source, url = BASE_URL_VARS[kind], os.environ.get(BASE_URL_VARS[kind]) or None
    if url is None:
        return
    problem = base_url_problem(url, schemes)
    if problem:
        raise ValueError(f"{where}: {source} {quote(url)}: {problem}")


def _usable_base_url(url: str) -> str:
    problem = base_url_problem(url)
    if problem:
        raise ValueError(problem)
    return url


BaseUrl = Annotated[str, AfterValidator(_usable_base_url)]
"""A base URL in a pipeline file: pydantic reports ``base_url_problem`` for it."""


def base_url_problem(url: str, schemes: tuple[str, ...] = HTTP_SCHEMES) -> str | None:
    """What makes ``url`` unusable as an API base URL (one of ``schemes``), or None."""
    if any(c.isspace() or not c.isprintable() for c in url):
        return "contains a space or a control character"
    try:
        parts = urlsplit(url)
        port = parts.port  # parsed lazily: a bad port raises only here
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if parts.scheme not in schemes:
        *most, last = [f"{scheme}://" for scheme in schemes]
        return f"expected an {', '.join(most)} or {last} URL"
    if not parts.hostname:
        return "the URL has no host"
    if port == 0:
        return "port 0 is not a port to connect to"
    return None


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be sent in an HTTP header (said without showing it), or None."""
    if key != key.strip():
        return "starts or ends with a space or line break (\\r, \\n): remove it"
    if not key.isascii():
        return "contains a non-ASCII character"
    if not key.isprintable():
        return "contains a control character"
    return None


def unusable_key(kind: str, key: str | None) -> str | None:
    """For an adapter used directly (not from a pipeline file): why the key it will
    send — ``key``, else its SDK's variables — cannot be sent, or None. The HTTP
    client would otherwise fail with a raw encoding error, or retry a request
    that can never be sent."""
    keys = [key] if key else [os.environ[n] for n in KEY_VARS[kind] if os.environ.get(n)]
    for candidate in keys:
        problem = key_problem(candidate)
        if problem:
            return f"the API key {problem}"
    return None


def _check_key(key: str, where: str, name: str) -> None:
    problem = key_problem(key)
    if problem:
        raise ValueError(f"{where}: the key in {name} {problem}")

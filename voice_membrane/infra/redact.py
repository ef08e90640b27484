"""Secrets out of every message: known keys by value and by shape, credentials in
URLs and headers.

Any text that leaves the process (an ``error:`` line, a ``retried:`` line, the
``--metrics-json`` report, the events log, a configuration error) may carry a
secret: a transport error quotes the header it could not send, a URL error
quotes the URL with its ``user:password@`` or ``?key=…``. ``redact(text)``
masks

- every key known by value: the values of the vendors' key variables
  (``KEY_VARIABLES``, read when called) and any value passed to ``remember``
  (a key read from ``llm.api_key_env``), in the forms a message may quote it
  (as is, stripped, escaped as in a ``repr`` of text or bytes);
- every key by its shape (``secret_shapes.py``): the vendors' keys (``sk-ant-…``,
  ``sk-proj-…``, ``sk-…``, ``sk_…``, ``AIza…``), JWTs and bearer tokens, known or not;
- either kind with invisible characters inside (a zero-width space, a soft
  hyphen, a word joiner: ``invisible.py``), masked whole;
- URL userinfo (``scheme://user:secret@host``) and query credentials
  (``key=``, ``api_key=``, ``token=``, … in a query string);
- the value after a credential header name (``x-api-key: …``,
  ``Authorization: Bearer …``, ``xi-api-key: …``).

``secret_pattern()`` is the same set for a stream (``parse/secret_stream.py``):
the known values and the shapes as one pattern, made again only when they change.

``quote(value)`` is how a user's value appears in a message: redacted, and cut
to a readable length (a 1 MB bad value is not echoed whole). This module is
vocabulary: every layer may import it.
"""

from __future__ import annotations

import os
import re
from typing import Final

from .invisible import has_invisible
from .secret_shapes import SHAPES, SecretPattern, might_hold_shape

MASK: Final = "***"
# The variables the vendors' SDKs read their keys from, and the token `serve`
# asks its clients for.
KEY_VARIABLES: Final = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "ELEVENLABS_API_KEY",
    "XI_API_KEY",
    "VOICE_MEMBRANE_TOKEN",
)
_ENCODED_KEYS: Final = tuple(os.fsencode(name) for name in KEY_VARIABLES)
# Shorter values are not masked by value: masking "abc" everywhere would garble
# messages, and no vendor issues keys that short.
MIN_SECRET_LENGTH: Final = 8
QUOTE_LIMIT: Final = 80

_remembered: set[str] = set()
_version = 0  # counts changes of _remembered
# The secrets in masking order, and what they were computed from (the key
# variables' values, the remembered values): redact() runs on every line of
# the events log, so it is computed again only when either changes.
_cache: tuple[tuple[object, ...], tuple[str, ...]] = ((), ())
_pattern: tuple[tuple[str, ...], SecretPattern] = ((), SecretPattern())

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/?#\s@'\"]+@")
_QUERY_CREDENTIAL = re.compile(
    r"(?i)([?&;](?:[a-z0-9_\-]*(?:key|token|secret|password|passwd|pwd|signature|sig)"
    r"|auth|code|credential|credentials)=)[^&#\s'\"()<>\[\],;]*"
)
_HEADER_CREDENTIAL = re.compile(
    r"(?i)\b((?:x-api-key|x-goog-api-key|xi-api-key|api-key|authorization|proxy-authorization)"
    r"['\"]?\s*[:=]\s*['\"]?(?:(?:bearer|basic|token)\s+)?)[^\s'\",;()<>\[\]{}]+"
)


def remember(*secrets: str | None) -> None:
    """Mask these values (keys read from other variables) from now on."""
    global _version
    for secret in secrets:
        if secret:
            _remembered.update(_forms(secret))
    _version += 1


def forget_all() -> None:
    """Drop every remembered value (tests)."""
    global _version
    _remembered.clear()
    _version += 1


def redact(text: str) -> str:
    """``text`` with every secret this module knows of masked."""
    if has_invisible(text):  # a key with a zero-width space inside: matched without it
        text = secret_pattern().sub(text, MASK)
    for secret in _secrets():
        if secret in text:
            text = text.replace(secret, MASK)
    if might_hold_shape(text):
        text = SHAPES.sub(text, MASK)
    if "://" in text:
        text = _USERINFO.sub(rf"\1{MASK}@", text)
    if "=" in text:
        text = _QUERY_CREDENTIAL.sub(rf"\1{MASK}", text)
    # Every header name the pattern knows holds one of these: most texts skip its
    # scan (a served image's data URL would cost the pattern MBs of scanning).
    lowered = text.lower()
    if "api-key" not in lowered and "authorization" not in lowered:
        return text
    return _HEADER_CREDENTIAL.sub(rf"\1{MASK}", text)


def secret_pattern() -> SecretPattern:
    """The known values and the shapes, for a stream (``SecretPattern``)."""
    global _pattern
    secrets = _secrets()
    if secrets is not _pattern[0]:
        _pattern = (secrets, SecretPattern(secrets))
    return _pattern[1]


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` for a message: redacted and at most about ``limit`` characters."""
    try:
        shown = redact(repr(value))
    except RecursionError:  # a value nested thousands deep (TOML, JSON)
        return "a value nested too deeply to show"
    if len(shown) <= limit:
        return shown
    return f"{shown[: limit - 1]}… ({len(shown):,} characters)"


def _key_values() -> tuple[object, ...]:
    """The key variables' values as the environment holds them, to compare with
    the last: on POSIX its raw bytes, read without ``os.environ.get``'s encoding
    of each name and decoding of each value (7 of them cost ~10 µs, on every
    event a server sends)."""
    data = getattr(os.environ, "_data", None)
    if os.name == "posix" and isinstance(data, dict):
        return tuple(map(data.get, _ENCODED_KEYS))
    return tuple(map(os.environ.get, KEY_VARIABLES))


def _secrets() -> tuple[str, ...]:
    global _cache
    source = (_version, *_key_values())
    if source != _cache[0]:
        secrets = set(_remembered)
        for name in KEY_VARIABLES:
            value = os.environ.get(name)
            if value:
                secrets.update(_forms(value))
        # Longest first: a value that contains another is masked whole.
        _cache = (source, tuple(sorted(secrets, key=len, reverse=True)))
    return _cache[1]


def _forms(secret: str) -> set[str]:
    """The ways a message may quote ``secret``: raw, stripped, escaped as text or bytes."""
    core = secret.strip()
    forms = {secret, core, repr(core)[1:-1], repr(core.encode("utf-8", "replace"))[2:-1]}
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


__all__ = [
    "KEY_VARIABLES",
    "MASK",
    "forget_all",
    "quote",
    "redact",
    "remember",
    "secret_pattern",
]

"""Reading model output as untrusted input.

The SDKs build streamed objects without validating them (``anthropic`` and
``openai`` use ``construct``): a field may hold any JSON type, a nested object
may be a plain dict or a string, a field may be missing. The readers read every
field through these helpers, so a value of the wrong type counts as absent and
is logged, never raised: the reply goes on with what is left.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("voice_membrane.providers")


def get(obj: Any, name: str) -> Any:
    """``obj.name`` (or ``obj[name]`` for a dict); None when absent."""
    # type() is: these run on every streamed delta; SDK objects are never dicts.
    return obj.get(name) if type(obj) is dict else getattr(obj, name, None)


def _wrong(where: str, name: str, expected: str, value: Any) -> None:
    log.warning("%s.%s: expected %s, got %s: ignored", where, name, expected, type(value).__name__)


def text(obj: Any, name: str, where: str) -> str | None:
    """A string field; None when absent or of another type (logged)."""
    value = obj.get(name) if type(obj) is dict else getattr(obj, name, None)
    if type(value) is str or value is None:
        return value
    if isinstance(value, str):  # a str subclass (an SDK enum)
        return str(value)
    _wrong(where, name, "a string", value)
    return None


def integer(obj: Any, name: str, where: str) -> int | None:
    value = get(obj, name)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    _wrong(where, name, "an integer", value)
    return None


def mapping(obj: Any, name: str, where: str) -> dict[str, Any] | None:
    """An object field holding a JSON object (a tool call's input)."""
    value = get(obj, name)
    if value is None or (isinstance(value, dict) and all(isinstance(k, str) for k in value)):
        return value
    _wrong(where, name, "an object", value)
    return None


def items(obj: Any, name: str, where: str) -> list[Any]:
    """A list field; empty when absent or of another type (logged)."""
    value = get(obj, name)
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    _wrong(where, name, "a list", value)
    return []

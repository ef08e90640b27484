"""Formatters: a normalized ``Request`` written the way one model takes it.

``get_formatter("anthropic-xml")`` (or an instance) picks one; see docs/formats.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .anthropic_xml import AnthropicXmlFormatter
from .base import BuiltRequest, Formatter, ProviderMessage
from .chatml import ChatMLFormatter
from .completions import CompletionsFormatter
from .gemini_prefill import GeminiPrefillFormatter
from .native import NativeFormatter
from .participants import ParticipantNames, SuppressionPredicate

FORMATTERS: dict[str, Callable[..., Formatter]] = {
    "anthropic-xml": AnthropicXmlFormatter,
    "native": NativeFormatter,
    "chatml": ChatMLFormatter,
    "completions": CompletionsFormatter,
    "gemini-prefill": GeminiPrefillFormatter,
}


def get_formatter(name: str, **options: Any) -> Formatter:
    """A new formatter by name, built with ``options`` (its constructor's keyword
    arguments); ``ValueError`` listing the known names otherwise."""
    try:
        factory = FORMATTERS[name]
    except KeyError:
        known = ", ".join(FORMATTERS)
        raise ValueError(f"unknown formatter {name!r}; known formatters: {known}") from None
    return factory(**options)


__all__ = [
    "FORMATTERS",
    "AnthropicXmlFormatter",
    "BuiltRequest",
    "ChatMLFormatter",
    "CompletionsFormatter",
    "Formatter",
    "GeminiPrefillFormatter",
    "NativeFormatter",
    "ParticipantNames",
    "ProviderMessage",
    "SuppressionPredicate",
    "get_formatter",
]

"""LLM providers by spec: ``local``, ``replay:PATH``, ``anthropic:MODEL``,
``openai:MODEL``, ``gemini:MODEL``."""

from __future__ import annotations

import os

from .base import Provider

CLOUD = ("anthropic", "openai", "gemini")
# Where each SDK looks for its key; checked up front so a missing key is one
# clear line before anything loads, not an error after the first prompt.
KEY_VARS = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
SPECS = "'local', 'replay:PATH', 'anthropic:MODEL', 'openai:MODEL' or 'gemini:MODEL'"


def create_provider(
    spec: str,
    *,
    model_path: str | None = None,
    max_tokens: int = 160,
    temperature: float = 0.7,
    replay_speed: float = 1.0,
    base_url: str | None = None,
    api_key_env: str | None = None,
    timeout_s: float = 60.0,
) -> tuple[Provider, str]:
    """The provider a spec names and the model to ask it for; ``ValueError`` (one
    line) for a bad spec. Cloud SDKs are imported only when asked for."""
    from .text_source import TextSourceProvider

    kind, _, arg = spec.partition(":")
    if spec == "local":
        from .local_llama import LocalLlama  # heavy: only when asked for

        # The system prompt comes with each request (else LocalLlama's default).
        source = LocalLlama(model_path, max_tokens=max_tokens, temperature=temperature)
        return TextSourceProvider(source), "local"
    if kind == "replay" and arg:
        from .replay import ReplaySource

        return TextSourceProvider(ReplaySource(arg, speed=replay_speed)), "replay"
    if kind in CLOUD and arg:
        api_key = None
        if api_key_env is not None:
            api_key = os.environ.get(api_key_env)
            if not api_key:
                raise ValueError(f"llm {spec!r}: api_key_env names {api_key_env}, which is not set")
        elif not any(os.environ.get(name) for name in KEY_VARS[kind]):
            raise ValueError(
                f"llm {spec!r}: no API key: set {' or '.join(KEY_VARS[kind])} "
                "(or name another variable with llm.api_key_env)"
            )
        return _cloud(kind, api_key, base_url, timeout_s), arg
    raise ValueError(f"llm {spec!r}: expected {SPECS}")


def _cloud(kind: str, api_key: str | None, base_url: str | None, timeout_s: float) -> Provider:
    if kind == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(api_key=api_key, base_url=base_url, timeout_s=timeout_s)
    if kind == "openai":
        from .openai import OpenAIProvider

        return OpenAIProvider(api_key=api_key, base_url=base_url, timeout_s=timeout_s)
    from .gemini import GeminiProvider

    return GeminiProvider(api_key=api_key, base_url=base_url, timeout_s=timeout_s)

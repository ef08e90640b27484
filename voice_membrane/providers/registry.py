"""LLM sources by spec: ``local``, ``replay:PATH`` (cloud providers come later)."""

from __future__ import annotations

from .base import LlmSource


def create_source(
    spec: str,
    *,
    model_path: str | None = None,
    max_tokens: int = 160,
    temperature: float = 0.7,
    system_prompt: str | None = None,
    replay_speed: float = 1.0,
) -> LlmSource:
    """The source a spec names; ``ValueError`` (one line) for anything else."""
    kind, _, arg = spec.partition(":")
    if spec == "local":
        from .local_llama import LocalLlama  # heavy: only when asked for

        return LocalLlama(
            model_path,
            max_tokens=max_tokens,
            temperature=temperature,
            system_prompt=system_prompt,
        )
    if kind == "replay" and arg:
        from .replay import ReplaySource

        return ReplaySource(arg, speed=replay_speed)
    if kind in ("anthropic", "openai", "gemini") and arg:
        raise ValueError(
            f"llm {spec!r}: cloud providers are not built yet; use 'local' or 'replay:PATH'"
        )
    raise ValueError(f"llm {spec!r}: expected 'local', 'replay:PATH' or 'PROVIDER:MODEL'")

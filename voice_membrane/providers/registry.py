"""LLM providers by spec: ``local``, ``local:PATH`` (another GGUF model),
``local:NAME`` (a model pulled by ``voice-membrane models pull NAME``),
``replay:PATH``, ``anthropic:MODEL``, ``openai:MODEL``, ``gemini:MODEL``."""

from __future__ import annotations

from pathlib import Path

from ..infra.redact import quote
from ..storage.model_store import names, pulled_path
from ..vendors.credentials import api_key, check_base_url
from .base import Provider
from .llama_sampling import LlamaSampling

CLOUD = ("anthropic", "openai", "gemini")
SPECS = (
    "'local', 'local:PATH.gguf', 'local:NAME', 'replay:PATH', 'anthropic:MODEL', "
    "'openai:MODEL' or 'gemini:MODEL'"
)


def create_provider(
    spec: str,
    *,
    model_path: str | None = None,
    n_threads: int | None = None,
    seed: int | None = None,
    max_tokens: int = 200,
    temperature: float = 0.7,
    sampling: LlamaSampling | None = None,
    replay_speed: float = 1.0,
    base_url: str | None = None,
    api_key_env: str | None = None,
    timeout_s: float = 60.0,
) -> tuple[Provider, str]:
    """The provider a spec names and the model to ask it for; ``ValueError`` (one
    line) for a bad spec, a missing model file, or an unusable key or base URL
    (checked here, so it is one clear line before anything loads, not an error
    after the first prompt). Cloud SDKs are imported only when asked for.
    ``sampling`` is the embedded model's (cloud models and recordings ignore it)."""
    from .text_source import TextSourceProvider

    kind, _, arg = spec.partition(":")
    where = f"llm {quote(spec)}"
    if kind == "local":
        # ``local:PATH`` names the model file in the spec itself (``--llm local:…``);
        # it wins over ``llm.model_path``. ``local:NAME`` a pulled model.
        model_path = (pulled_path(arg, "llm", where) or arg) or model_path
        if model_path is not None and not Path(model_path).is_file():
            named = where if arg else f"llm.model_path {quote(model_path)}"
            raise ValueError(f"{named}: no such model file{_name_hint(arg)}")
        from .local_llama import LocalLlama  # heavy: only when asked for

        # The system prompt comes with each request (else LocalLlama's default).
        source = LocalLlama(
            model_path,
            n_threads=n_threads,
            max_tokens=max_tokens,
            temperature=temperature,
            sampling=sampling,
            seed=seed,
        )
        return TextSourceProvider(source), "local"
    if kind == "replay" and arg:
        from .replay import ReplaySource

        return TextSourceProvider(ReplaySource(arg, speed=replay_speed)), "replay"
    if kind in CLOUD and arg:
        key = api_key(kind, where, api_key_env)
        check_base_url(kind, where, base_url)
        return _cloud(kind, key, base_url, timeout_s), arg
    raise ValueError(f"{where}: expected {SPECS}")


def _name_hint(arg: str) -> str:
    """For a bare word that is neither a file nor a listed model: the names."""
    if not arg or "/" in arg or arg.endswith(".gguf"):
        return ""
    return f" nor a model to pull ({', '.join(names('llm'))}: voice-membrane models list)"


def _cloud(kind: str, api_key: str | None, base_url: str | None, timeout_s: float) -> Provider:
    if kind == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(api_key=api_key, base_url=base_url, timeout_s=timeout_s)
    if kind == "openai":
        from .openai import OpenAIProvider

        return OpenAIProvider(api_key=api_key, base_url=base_url, timeout_s=timeout_s)
    from .gemini import GeminiProvider

    return GeminiProvider(api_key=api_key, base_url=base_url, timeout_s=timeout_s)

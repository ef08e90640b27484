"""TTS engines by name, for the command line and configuration files."""

from __future__ import annotations

from .base import TtsEngine
from .espeak import EspeakEngine
from .piper import PiperEngine  # does not import piper itself (GPL): start() does

SPEC_FORMS = "espeak, espeak:VOICE, piper, piper:/path/model.onnx"


def create_engine(spec: str) -> TtsEngine:
    """The engine named by ``spec`` (not started): one of ``SPEC_FORMS``."""
    name, sep, arg = spec.strip().partition(":")
    if name == "espeak" and not sep:
        return EspeakEngine()
    if name == "espeak" and arg:
        return EspeakEngine(voice=arg)
    if name == "piper" and not sep:
        return PiperEngine()
    if name == "piper" and arg:
        return PiperEngine(model=arg)
    raise ValueError(f"unknown TTS engine {spec!r}: use one of {SPEC_FORMS}")

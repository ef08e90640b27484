"""TTS engines by name, for the command line and configuration files."""

from __future__ import annotations

from pathlib import Path

from ..infra.redact import quote
from .base import TtsEngine
from .espeak import EspeakEngine
from .options import TtsOptions
from .piper import PiperEngine  # does not import piper itself (GPL): start() does

SPEC_FORMS = (
    "espeak, espeak:VOICE, piper, piper:/path/model.onnx, elevenlabs:VOICE_ID, "
    "elevenlabs-http:VOICE_ID, openai:VOICE"
)


def create_engine(
    options: TtsOptions | str, sink_rate: int | None = None, *, threads: int | None = None
) -> TtsEngine:
    """The engine ``options.spec`` names (not started): one of ``SPEC_FORMS``;
    ``ValueError`` (one line) for another spec, a Piper model file that is not
    there, or a cloud engine's unusable options, missing or unusable key or base
    URL. An unknown espeak or ElevenLabs voice is found by the engine's
    ``start``, an unknown OpenAI voice by its first request.
    ``sink_rate``: the rate the audio will be played at, for engines that can
    produce it directly. ``threads``: a local neural voice's compute threads
    (Piper's; None: onnxruntime's default, one per core)."""
    if isinstance(options, str):
        options = TtsOptions(spec=options)
    spec = options.spec
    name, sep, arg = spec.strip().partition(":")
    if name == "espeak" and not sep:
        return EspeakEngine()
    if name == "espeak" and arg:
        return EspeakEngine(voice=arg)
    if name == "piper" and not sep:
        return PiperEngine(threads=threads)
    if name == "piper" and arg:
        if not Path(arg).is_file():
            raise ValueError(f"tts {quote(spec)}: no such Piper model file")
        return PiperEngine(model=arg, threads=threads)
    if name == "openai" and arg.strip():
        from .openai_speech import OpenAISpeechEngine  # imports the openai SDK: only when asked

        engine = OpenAISpeechEngine(arg, options)
        engine.check_credentials()  # one line now, not an error after the first reply
        return engine
    if name == "elevenlabs" and arg:
        from .elevenlabs_ws import ElevenLabsSocketEngine  # imports websockets: only when used

        return ElevenLabsSocketEngine(arg, options, sink_rate)
    if name == "elevenlabs-http" and arg:
        from .elevenlabs_http import ElevenLabsHttpEngine

        return ElevenLabsHttpEngine(arg, options, sink_rate)
    raise ValueError(f"unknown TTS engine {quote(spec)}: use one of {SPEC_FORMS}")

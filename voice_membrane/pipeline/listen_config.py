"""The ``[stt]`` section of a pipeline file (``[vad]`` and ``[endpoint]`` are
``listening.settings``' models): which speech-to-text engine listens."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..stt.base import DEFAULT_SPEC


class SttConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # whisper (embedded tiny.en, no key) | whisper:PATH | pocketsphinx (embedded, light)
    # | deepgram:MODEL | openai:MODEL
    spec: str = Field(DEFAULT_SPEC, min_length=1)
    # pocketsphinx: hear exactly these phrases (commands, known questions): far more
    # accurate on them, deaf to anything else; whisper: a hint toward them (docs/stt.md).
    phrases: list[str] | None = None
    base_url: str | None = None  # default: the engine's variable, then the vendor
    api_key_env: str | None = None  # the variable holding the key (default: the vendor's)
    # whisper: the encoder's window for a final's quick decode, seconds (1-30; default
    # 15, redone through whisper's own 30 when it is unsure: docs/stt.md, "The quick final")
    final_window_s: float | None = Field(None, ge=1.0, le=30.0)
    retry: bool = True  # a cloud stream retried once before its first transcript

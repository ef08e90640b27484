"""The ``[tts]`` options of a pipeline file, validated with pydantic.

One model for every engine: the keys a cloud engine does not use are ignored by
the local ones (``spec`` says which engine). Defaults favour low first audio.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..vendors.credentials import BaseUrl

ElevenLabsFormat = Literal["pcm_16000", "pcm_22050", "pcm_24000", "pcm_44100", "ulaw_8000"]
ELEVENLABS_FORMATS: tuple[str, ...] = get_args(ElevenLabsFormat)


class VoiceSettings(BaseModel):
    """ElevenLabs ``voice_settings`` (unset keys keep the voice's own)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stability: float | None = Field(None, ge=0, le=1)
    similarity_boost: float | None = Field(None, ge=0, le=1)
    style: float | None = Field(None, ge=0, le=1)
    use_speaker_boost: bool | None = None
    speed: float | None = Field(None, ge=0.7, le=1.2)


class TtsOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: str = Field(
        "piper",
        description="piper | piper:MODEL.onnx | espeak | espeak:VOICE | elevenlabs:VOICE_ID"
        " | elevenlabs-http:VOICE_ID | openai:VOICE",
    )
    # Cloud engines. model: ElevenLabs model_id (default eleven_flash_v2_5) or the
    # OpenAI speech model (default gpt-4o-mini-tts).
    model: str | None = None
    # Default: matched to the sink's rate (ElevenLabs: pcm_16000/22050/24000/44100,
    # ulaw_8000; OpenAI speaks 24 kHz PCM only).
    output_format: ElevenLabsFormat | None = None
    voice_settings: VoiceSettings | None = None
    base_url: BaseUrl | None = (
        None  # default: ELEVENLABS_BASE_URL / OPENAI_BASE_URL, then the vendor
    )
    api_key_env: str | None = None  # default: ELEVENLABS_API_KEY / OPENAI_API_KEY
    max_retries: int = Field(3, ge=0, le=10)  # 429/5xx before the first audio
    # No bytes from the service for this long: an error, not a silent hang.
    read_timeout_s: float = Field(10.0, gt=0, le=600, allow_inf_nan=False)
    # HTTP engines: pieces synthesized at once (the next overlaps playback).
    max_in_flight: int = Field(2, ge=1, le=8)
    # ElevenLabs socket.
    multi_context: bool = False  # one socket for the session, a context per turn
    auto_mode: bool = False
    chunk_length_schedule: tuple[int, ...] | None = None
    inactivity_timeout_s: int = Field(20, ge=5, le=180)
    # ElevenLabs HTTP.
    optimize_streaming_latency: int | None = Field(None, ge=0, le=4)
    # OpenAI.
    instructions: str | None = Field(None, max_length=4096)
    speed: float | None = Field(None, ge=0.25, le=4.0)

    @field_validator("chunk_length_schedule")
    @classmethod
    def _schedule(cls, schedule: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if schedule is not None and not all(50 <= n <= 500 for n in schedule):
            raise ValueError("each chunk length is 50 to 500 characters")
        return schedule

"""Pipeline files: TOML, validated with pydantic.

A pipeline file names the LLM, the TTS engine, the sink and the chunker's
options. Every problem — a missing file, bad TOML, an unknown key, a bad value —
becomes one ``ConfigError`` line naming the file, the key and what is allowed.

Example (``pipelines/local.toml``)::

    [llm]
    spec = "local"            # or "anthropic:claude-…", "openai:gpt-…", "gemini:gemini-…"
    max_tokens = 120

    [tts]
    spec = "piper"

    [sink]
    kind = "auto"
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..messages import LINE_BREAK
from ..providers.credentials import BaseUrl
from ..redact import quote
from ..tts.options import TtsOptions


class ConfigError(ValueError):
    """A pipeline file or option that cannot be used; the message is one line."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LlmConfig(_Section):
    spec: str = Field(
        "local", description="local | replay:PATH | anthropic:MODEL | openai:MODEL | gemini:MODEL"
    )
    formatter: Literal["native", "anthropic-xml", "chatml", "completions", "gemini-prefill"] = (
        "native"
    )
    model_path: str | None = None
    max_tokens: int = Field(160, gt=0, le=65536)
    temperature: float = Field(0.7, ge=0, le=2)
    thinking_budget: int | None = Field(None, ge=1024)
    system_prompt: str | None = None
    replay_speed: float = Field(1.0, ge=0)
    base_url: BaseUrl | None = None  # default: the SDK's environment variable, then the vendor
    api_key_env: str | None = None  # the variable holding the key (default: the SDK's own)
    streaming: bool = True
    max_retries: int = Field(3, ge=0, le=10)
    # Finite, at most a day: google-genai turns an infinite one into OverflowError.
    timeout_s: float = Field(60.0, gt=0, le=86400, allow_inf_nan=False)
    # Over every attempt and backoff wait. Default: 20 s for cloud models; none for the
    # embedded model and recordings (computing, not waiting on a server).
    first_token_deadline_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    # The most tokens a request may hold; older turns are dropped to fit. Default:
    # the embedded model's context less max_tokens; cloud models 32000 (estimated).
    context_tokens: int | None = Field(None, ge=64)
    assistant_name: str = Field("Assistant", min_length=1, max_length=100)
    user_name: str = Field("User", min_length=1, max_length=100)

    @field_validator("assistant_name", "user_name")
    @classmethod
    def _one_line(cls, value: str) -> str:
        # Prefill formats write names as "Name:" lines: a name with a line break
        # or a ":" could forge a turn.
        if ":" in value or LINE_BREAK.search(value):
            raise ValueError("a name is one line without ':'")
        return value

    @model_validator(mode="after")
    def _two_sides(self) -> LlmConfig:
        if self.user_name == self.assistant_name:
            raise ValueError(
                f"user_name and assistant_name are both {self.user_name!r}: the user's "
                "messages would be sent as the assistant's"
            )
        return self


class SinkConfig(_Section):
    kind: Literal["auto", "speaker", "wav", "null"] = "auto"
    path: str = "voice-membrane-reply.wav"
    backend: Literal["sounddevice", "pyaudio"] = "sounddevice"
    device: str | None = None
    # The null sink only: play into nothing at a speaker's pace (a speaker always
    # does; a WAV file cannot).
    realtime: bool = False

    @field_validator("realtime")
    @classmethod
    def _only_for_the_null_sink(cls, realtime: bool, info: ValidationInfo) -> bool:
        kind = info.data.get("kind")
        if realtime and kind is not None and kind != "null":
            raise PydanticCustomError(
                "realtime_needs_null",
                'only the null sink has it (kind is "{kind}", not "null")',
                {"kind": kind},
            )
        return realtime


class ChunkerConfig(_Section):
    first_chunk_words: int = Field(3, ge=1)
    min_clause_words: int = Field(3, ge=0)
    clause_chars: int = Field(120, ge=0)
    max_chars: int = Field(250, ge=1)
    markdown: bool = True
    code_block_text: str | None = None
    tables: Literal["rows", "skip"] = "rows"
    table_text: str | None = None
    urls: bool = True
    symbols: bool = True


class PipelineConfig(_Section):
    description: str = ""
    llm: LlmConfig = LlmConfig()
    tts: TtsOptions = TtsOptions()
    sink: SinkConfig = SinkConfig()
    chunker: ChunkerConfig = ChunkerConfig()

    def with_overrides(self, overrides: dict[str, dict[str, Any]]) -> PipelineConfig:
        """A copy with ``{section: {key: value}}`` applied (command-line flags), validated."""
        data = self.model_dump()
        for section, values in overrides.items():
            data[section].update({k: v for k, v in values.items() if v is not None})
        return _validate(data, "command line")


def load_pipeline(path: str | Path) -> PipelineConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such pipeline file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer longer than Python converts (4300 digits)
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    config = _validate(data, str(path))
    # A recording named in a pipeline file is found relative to that file.
    kind, _, target = config.llm.spec.partition(":")
    if kind == "replay" and target and not Path(target).is_absolute():
        spec = f"replay:{(path.parent / target).resolve()}"
        config = config.with_overrides({"llm": {"spec": spec}})
    return config


def _validate(data: dict[str, Any], where: str) -> PipelineConfig:
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]
    key = ".".join(loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        model: type[BaseModel] = PipelineConfig
        for part in loc[:-1]:
            annotation = model.model_fields[part].annotation
            assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
            model = annotation
        allowed = ", ".join(model.model_fields)
        return f"unknown key {quote(key)} (allowed here: {allowed})"
    extra = f" ({exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
    # The bad value is quoted redacted and cut: it may be a pasted key, or 1 MB.
    return f"{key}: {error['msg']}, got {quote(error['input'])}{extra}"

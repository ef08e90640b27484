"""Pipeline files: TOML, validated with pydantic.

A pipeline file names the LLM, the TTS engine, the sink and the chunker's
options. Every problem — a missing file, bad TOML, an unknown key, a bad value —
becomes one ``ConfigError`` line naming the file, the key and what is allowed.

Example (``pipelines/local.toml``)::

    [llm]
    spec = "local"            # or "anthropic:claude-…", "openai:gpt-…", "gemini:gemini-…"
    max_tokens = 200

    [tts]
    spec = "piper"

    [sink]
    kind = "auto"
"""

from __future__ import annotations

import difflib
import functools
import tomllib
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

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

from ..chunking.chunker import IDLE_FLUSH_S
from ..chunking.cut_off import CUT_OFF_TEXT
from ..chunking.phrase_guard import PhraseGuard
from ..infra.redact import quote
from ..listening.settings import EndpointSettings, VadSettings
from ..storage.model_store import names as model_names
from ..tts.options import TtsOptions
from ..vendors.credentials import BaseUrl
from ..vocab.messages import LINE_BREAK
from .conversation_config import ConversationConfig
from .listen_config import SttConfig
from .llm_sampling import EmbeddedSampling
from .recording_config import RecordingConfig
from .tools_config import ToolsConfig

# The pipeline files shipped beside the package (pipelines/ in the repository).
SHIPPED_PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"
DEFAULT_PIPELINE = SHIPPED_PIPELINES / "local.toml"


class ConfigError(ValueError):
    """A pipeline file or option that cannot be used; the message is one line."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LlmConfig(EmbeddedSampling, _Section):
    # The embedded model's sampling and sentence limit (top_p, top_k, min_p,
    # repeat_penalty, stop, max_sentences) come from EmbeddedSampling.
    spec: str = Field(
        "local",
        description="local | local:PATH.gguf | replay:PATH | anthropic:MODEL | openai:MODEL"
        " | gemini:MODEL",
    )
    formatter: Literal["native", "anthropic-xml", "chatml", "completions", "gemini-prefill"] = (
        "native"
    )
    model_path: str | None = None
    # The embedded model's sampling seed: the same prompt gets the same reply
    # (unset: a new seed each reply). Cloud models ignore it.
    seed: int | None = Field(None, ge=0, lt=2**31)
    max_tokens: int = Field(200, gt=0, le=65536)
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
    # Once a call has begun, the longest wait for more (every model). Default: 5 s
    # for cloud models; 60 s for the embedded model and recordings, and with
    # thinking_budget or [images] model_output (thinking and an image take their
    # time between two deltas; a busy machine slows the embedded model).
    stall_timeout_s: float | None = Field(None, gt=0, le=86400, allow_inf_nan=False)
    # The most tokens a request may hold; older turns are dropped to fit. Default:
    # the embedded model's context less max_tokens; cloud models 32000 (estimated).
    context_tokens: int | None = Field(None, ge=64)
    assistant_name: str = Field("Assistant", min_length=1, max_length=100)
    user_name: str = Field("User", min_length=1, max_length=100)
    # How the model writes tool calls: "xml" (the format's own: native blocks, or
    # <function_calls> in prefill), "json" (JSON in its text, as small and local
    # models do; the format's own still read) — "auto" is the same as "json".
    tool_syntax: Literal["xml", "json", "auto"] = "xml"
    # JSON calls: "buffer" (hold what may be a call, at most json_tool_max_hold
    # characters before it is recognised), "placeholder" (and say
    # json_tool_placeholder while the call runs), "passthrough" (speak everything).
    json_tool_mode: Literal["buffer", "placeholder", "passthrough"] = "buffer"
    json_tool_max_hold: int = Field(200, ge=16, le=10_000)
    json_tool_placeholder: str = Field("One moment.", max_length=200)

    @field_validator("assistant_name", "user_name")
    @classmethod
    def _one_line(cls, value: str) -> str:
        # Prefill formats write names as "Name:" lines: a name with a line break
        # or a ":" could forge a turn.
        if ":" in value or LINE_BREAK.search(value):
            raise ValueError("a name is one line without ':'")
        return value

    @model_validator(mode="after")
    def _embedded_speaks_chat(self) -> LlmConfig:
        # The embedded model is prompted through llama.cpp's own chat template: a
        # prefill format would be one chat message holding a second template, which
        # SmolLM2 echoes (template text spoken) or answers with nothing (issue 24).
        if self.spec == "local" and self.formatter != "native":
            raise PydanticCustomError(
                "embedded_chat_only",
                "formatter {formatter} does not work with the embedded model (spec "
                "local): it is prompted through its own chat template, and a prefill "
                "transcript inside it makes the model echo the template or say nothing; "
                "use formatter native",
                {"formatter": self.formatter},
            )
        return self

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
    # Cancel this sink's echo in what the listener hears (WebRTC's AEC3, the livekit
    # package; never for a browser, which cancels its own, nor a recording): auto (the
    # default): for run --listen on the speaker, when livekit is installed; webrtc:
    # phone calls too, and a ConfigError without livekit; none: never (docs/listening.md).
    echo_canceller: Literal["auto", "webrtc", "none"] = "auto"

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
    # The reply's language (abbreviation and ordinal tables); none: all of them.
    language: Literal["en", "de", "fr", "es", "it", "nl", "pt"] | None = None
    # No new text for this long: what the chunker holds is spoken (the turn's timed
    # flush, pipeline/reply_stages.py; the chunker only carries the setting).
    idle_flush_s: float = Field(IDLE_FLUSH_S, gt=0, le=60, allow_inf_nan=False)
    # Said after a sentence the token limit (llm.max_tokens) cut; "": none.
    cut_off_text: str = Field(CUT_OFF_TEXT, max_length=200)


PrioritySetting = bool | Literal["auto"]
PRIORITY_AHEAD_S = 0.5  # the default of [scheduling] priority_ahead_s


class SchedulingConfig(_Section):
    """How the LLM and the TTS engine share this machine (docs/pipelines.md)."""

    # Hold the LLM while the engine makes a piece's first audio: "auto" when both
    # compute on this machine (the embedded model and a local voice), or true/false.
    first_audio_priority: PrioritySetting = "auto"
    # Later pieces get priority too while less audio than this is queued ahead of
    # playback (0: the first piece only).
    priority_ahead_s: float = Field(PRIORITY_AHEAD_S, ge=0, le=10, allow_inf_nan=False)
    # The embedded model's threads and the local voice's (Piper's onnxruntime
    # intra-op threads); unset: chosen together for this machine's cores.
    llm_threads: int | None = Field(None, ge=1, le=256)
    tts_threads: int | None = Field(None, ge=1, le=256)


class PolicyConfig(_Section):
    """Stream policies (``parse.policy``) every reply of the pipeline passes."""

    # The tools the model may call (unset: any it is given). A call to another is
    # never run: the model gets an error result saying why.
    allow_tools: list[str] | None = None
    # Never spoken, judged on the text as the voice gets it (chunking.PhraseGuard:
    # case, look-alikes, invisible characters and punctuation between words
    # ignored, whole words): the phrase and the rest of its sentence are replaced
    # by banned_replacement, or dropped.
    banned_phrases: list[str] = []
    banned_action: Literal["replace", "drop"] = "replace"
    banned_replacement: str = Field("I'd rather not say that.", max_length=500)

    @field_validator("banned_phrases")
    @classmethod
    def _no_blank_phrase(cls, phrases: list[str]) -> list[str]:
        if any(not phrase.strip() for phrase in phrases):
            raise ValueError("a banned phrase is blank")
        return phrases

    @model_validator(mode="after")
    def _phrases_can_be_guarded(self) -> PolicyConfig:
        if self.banned_phrases:
            phrase_guard_for(self)  # a phrase with no letter, a replacement that says one
        return self


def phrase_guard_for(policy: PolicyConfig) -> PhraseGuard | None:
    """The guard of the pipeline's banned phrases (made once per set of them)."""
    if not policy.banned_phrases:
        return None
    return _phrase_guard(
        tuple(policy.banned_phrases), policy.banned_action, policy.banned_replacement
    )


@functools.lru_cache(maxsize=16)
def _phrase_guard(
    phrases: tuple[str, ...], action: Literal["replace", "drop"], replacement: str
) -> PhraseGuard:
    return PhraseGuard(phrases, action=action, replacement=replacement)


class ImagesConfig(_Section):
    """Generated images (docs/images.md): never spoken; saved by ``run``, sent
    to the page by ``serve``."""

    # The image tool offered to the model: "openai:MODEL" (the OpenAI Images API,
    # e.g. openai:gpt-image-1); None offers none.
    tool: str | None = Field(None, pattern=r"^openai:[A-Za-z0-9._-]{1,64}$")
    partial_images: int = Field(2, ge=0, le=3)  # streamed before the final image
    size: str | None = Field(None, pattern=r"^(auto|[0-9]{2,5}x[0-9]{2,5})$")
    quality: Literal["low", "medium", "high", "auto"] | None = None
    base_url: BaseUrl | None = None  # default: OPENAI_BASE_URL, then api.openai.com
    api_key_env: str | None = None  # default: OPENAI_API_KEY
    timeout_s: float = Field(180.0, gt=0, le=3600, allow_inf_nan=False)
    # The model may answer with images itself (Gemini image models): asks for
    # response_modalities TEXT and IMAGE.
    model_output: bool = False
    folder: str = Field("voice-membrane-images", min_length=1)  # run: where images are saved


class BlobsConfig(_Section):
    # Where the session's images are kept (a content-addressed FileBlobStore), relative
    # to the pipeline file; unset: in memory, for the session's life.
    dir: str | None = Field(None, min_length=1)


class DebugConfig(_Section):
    # Every provider request and response written here, sanitized and redacted, one
    # JSON file per call, with each turn's latency report (relative to the file).
    dir: str | None = Field(None, min_length=1)


class PipelineConfig(_Section):
    description: str = ""
    llm: LlmConfig = LlmConfig()
    tts: TtsOptions = TtsOptions()
    sink: SinkConfig = SinkConfig()
    chunker: ChunkerConfig = ChunkerConfig()
    scheduling: SchedulingConfig = SchedulingConfig()
    policy: PolicyConfig = PolicyConfig()
    tools: ToolsConfig = ToolsConfig()
    images: ImagesConfig = ImagesConfig()
    blobs: BlobsConfig = BlobsConfig()
    debug: DebugConfig = DebugConfig()
    # The assistant speaks first (docs/pipelines.md, "A greeting").
    conversation: ConversationConfig = ConversationConfig()
    # Each served session or call written down as heard (docs/recording.md).
    recording: RecordingConfig = RecordingConfig()
    # Listening (run --input / --listen): docs/stt.md, docs/listening.md.
    stt: SttConfig = SttConfig()
    vad: VadSettings = VadSettings()
    endpoint: EndpointSettings = EndpointSettings()

    def with_overrides(self, overrides: dict[str, dict[str, Any]]) -> PipelineConfig:
        """A copy with ``{section: {key: value}}`` applied (command-line flags), validated."""
        # Only what was set: a key left to its default stays unset (a recording's own
        # tool syntax applies where the pipeline names none).
        data = self.model_dump(exclude_unset=True)
        for section, values in overrides.items():
            given = {k: v for k, v in values.items() if v is not None}
            if given:
                data.setdefault(section, {}).update(given)
        return _validate(data, "command line")


def shipped_pipeline_names() -> list[str]:
    """The names of the pipelines that come with the package (``local``, ``openai``, …)."""
    return sorted(p.stem for p in SHIPPED_PIPELINES.glob("*.toml"))


def pipeline_path(value: str | Path) -> Path:
    """A pipeline file's path, or a shipped pipeline's name (``local``) when no
    such file exists here."""
    path = Path(value)
    if not path.exists() and path.suffix == "" and path.name == str(value):
        shipped = SHIPPED_PIPELINES / f"{path.name}.toml"
        if shipped.is_file():
            return shipped
    return path


def load_pipeline(path: str | Path) -> PipelineConfig:
    path = pipeline_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        names = ", ".join(shipped_pipeline_names())
        raise ConfigError(
            f"{path}: no such pipeline file (or a shipped pipeline's name: {names})"
        ) from None
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
    # A recording or model file named in a pipeline file is found relative to that
    # file (a pulled model's name, ``local:NAME``, is not a path).
    kind, _, target = config.llm.spec.partition(":")
    pulled = kind == "local" and target in model_names("llm")
    if kind in ("replay", "local") and target and not Path(target).is_absolute() and not pulled:
        spec = f"{kind}:{(path.parent / target).resolve()}"
        config = config.with_overrides({"llm": {"spec": spec}})
    # So is an MCP server's working folder.
    servers = [
        server.model_copy(update={"cwd": str((path.parent / server.cwd).resolve())})
        if server.cwd is not None and not Path(server.cwd).is_absolute()
        else server
        for server in config.tools.mcp
    ]
    if servers != config.tools.mcp:
        config = config.model_copy(
            update={"tools": config.tools.model_copy(update={"mcp": servers})}
        )
    # And the blob, debug and recording folders.
    for section in ("blobs", "debug", "recording"):
        folder = getattr(config, section).dir
        if folder is not None and not Path(folder).is_absolute():
            config = config.with_overrides(
                {section: {"dir": str((path.parent / folder).resolve())}}
            )
    return config


def _validate(data: dict[str, Any], where: str) -> PipelineConfig:
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    error = exc.errors()[0]
    key = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
    ).lstrip(".")
    key = key or "(top level)"
    if error["type"] == "extra_forbidden":
        model: type[BaseModel] = PipelineConfig
        for part in error["loc"][:-1]:
            if isinstance(part, int):  # an entry of a list of tables ([[tools.mcp]])
                continue
            annotation = model.model_fields[part].annotation
            if get_origin(annotation) is list:
                annotation = get_args(annotation)[0]
            assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
            model = annotation
        close = difflib.get_close_matches(str(error["loc"][-1]), list(model.model_fields), n=1)
        if close:  # a typo: the one key meant, not the whole list
            return f"unknown key {quote(key)} (did you mean {close[0]}?)"
        allowed = ", ".join(model.model_fields)
        return f"unknown key {quote(key)} (allowed here: {allowed})"
    extra = f" ({exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
    if isinstance(error["input"], dict):  # a whole table: the message names the keys
        return f"{key}: {error['msg']}{extra}"
    # The bad value is quoted redacted and cut: it may be a pasted key, or 1 MB.
    return f"{key}: {error['msg']}, got {quote(error['input'])}{extra}"

"""From a validated pipeline file to the parts of a session."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..infra.redact import remember
from ..membrane.images import ImageTool
from ..membrane.membrane import DEFAULT_STALL_TIMEOUT_S, Membrane
from ..membrane.tools_mcp import McpServer, McpToolbox
from ..parse.json_tools import JsonToolInterceptor
from ..parse.policy import StreamPolicy, ToolAllowList
from ..providers.openai_images import OpenAIImages
from ..providers.registry import CLOUD, create_provider
from ..providers.replay import ReplaySource
from ..sinks.base import AudioSink
from ..sinks.registry import create_sink
from ..sinks.speaker import speaker_available
from ..storage.blobs import BlobStore, FileBlobStore, MemoryBlobStore
from ..tts.base import TtsEngine
from ..tts.registry import create_engine
from ..vendors.credentials import api_key, check_base_url, key_problem
from ..vendors.retry import RetryPolicy
from ..vocab.messages import ModelConfig, RequestOptions
from .config import (
    ConfigError,
    ImagesConfig,
    LlmConfig,
    PipelineConfig,
    PolicyConfig,
    phrase_guard_for,
)
from .greeting import greeting_for
from .history import RequestCounter, counter_for
from .scheduling import thread_budget
from .session import Session
from .tools_config import McpServerConfig, ToolsConfig

SPEAKER_RATE = 22050  # the rate of both embedded voices; other rates are resampled
# A cloud model's context is far larger; this keeps a long session's requests (each
# carries the whole history) from growing in cost and latency without end.
CLOUD_CONTEXT_TOKENS = 32000
# A server that accepts and never answers must not keep a turn silent for minutes.
# The embedded model gets no deadline by default: it is computing, not waiting, and
# a long prompt can take SmolLM2 several seconds (8.6 s for 1,837 tokens on 2 cores).
CLOUD_FIRST_TOKEN_DEADLINE_S = 20.0
# Thinking and a generated image may pause a stream for long between two deltas.
SLOW_STALL_TIMEOUT_S = 60.0
# The membrane's limit on a round of tool calls, beyond each call's own: a toolbox
# times its calls out first, so each call keeps its own result or error.
TOOL_ROUND_GRACE_S = 5.0


@dataclass(frozen=True, slots=True)
class Parts:
    membrane: Membrane
    model: ModelConfig
    options: RequestOptions
    engine: TtsEngine
    sink: AudioSink
    notice: str | None  # something the user should be told once (a fallback taken)
    wav_path: str | None  # where the audio goes when the sink is a WAV file
    context: RequestCounter | None = None  # keeps long sessions within the model's context
    toolbox: McpToolbox | None = None  # the pipeline's MCP servers (not yet started)
    blob_store: BlobStore | None = None  # the conversation's images ([blobs] dir)


def session_for(
    config: PipelineConfig, parts: Parts, *, sink: AudioSink | None = None, **hooks: Any
) -> Session:
    """The session a pipeline's parts make (its prompt, model, options, chunker,
    context trimming and tools); ``sink`` replaces the pipeline's own, ``hooks``
    are the face's callbacks and extras (``log``, ``on_piece_start``, …)."""
    return Session(
        parts.membrane,
        parts.engine,
        sink if sink is not None else parts.sink,
        system_prompt=config.llm.system_prompt,
        model=parts.model,
        options=parts.options,
        chunker_options={
            **config.chunker.model_dump(),
            "phrase_guard": phrase_guard_for(config.policy),
        },
        context=parts.context,
        toolbox=parts.toolbox,
        first_audio_priority=config.scheduling.first_audio_priority,
        priority_ahead_s=config.scheduling.priority_ahead_s,
        greeting=greeting_for(config.conversation),
        **hooks,
    )


def build_parts(config: PipelineConfig, sink_rate: int | None = None) -> Parts:
    """Create (not start) the membrane, engine and sink a pipeline names.
    ``sink_rate``: the rate the audio is played at when the caller brings its own
    sink (a served session's format), so a cloud voice is asked for that rate
    rather than resampled to it."""
    llm = config.llm
    cloud = llm.spec.partition(":")[0] in CLOUD
    deadline = llm.first_token_deadline_s
    if deadline is None and cloud:
        deadline = CLOUD_FIRST_TOKEN_DEADLINE_S
    stall = llm.stall_timeout_s
    if stall is None:
        # The embedded model computes here: on a busy machine a token may take
        # seconds (llama.cpp's threads lose the cores), which is slow, not stalled.
        slow = llm.thinking_budget is not None or config.images.model_output or not cloud
        stall = SLOW_STALL_TIMEOUT_S if slow else DEFAULT_STALL_TIMEOUT_S
    blob_store: BlobStore = (
        FileBlobStore(config.blobs.dir) if config.blobs.dir is not None else MemoryBlobStore()
    )
    threads = thread_budget(config.scheduling)
    try:
        provider, model = create_provider(
            llm.spec,
            model_path=llm.model_path,
            n_threads=threads.llm,
            seed=llm.seed,
            max_tokens=llm.max_tokens,
            temperature=llm.temperature,
            sampling=llm.sampling(),
            replay_speed=llm.replay_speed,
            base_url=llm.base_url,
            api_key_env=llm.api_key_env,
            timeout_s=llm.timeout_s,
        )
        membrane = Membrane(
            provider,
            llm.formatter,
            retry=RetryPolicy(max_retries=llm.max_retries),
            streaming=llm.streaming,
            first_token_deadline_s=deadline,
            stall_timeout_s=stall,
            policies=policies_for(config.policy),
            json_tools=json_tools_for(_with_recorded_tool_syntax(llm, provider)),
            tool_timeout_s=config.tools.timeout_s + TOOL_ROUND_GRACE_S,
            max_tool_result_chars=config.tools.max_result_chars,
            max_reply_tool_result_chars=config.tools.max_reply_result_chars,
            image_tool=image_tool_for(config.images),
            blob_store=blob_store,
            # Generated images go to the session's blob store: the history keeps ids.
            image_store=blob_store.store if blob_store is not None else None,
        )
        engine = create_engine(config.tts, sink_rate or SPEAKER_RATE, threads=threads.tts)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    model_config = ModelConfig(
        model=model,
        max_tokens=llm.max_tokens,
        temperature=llm.temperature,
        thinking_budget=llm.thinking_budget,
    )
    options = RequestOptions(
        assistant_participant=llm.assistant_name,
        human_participant=llm.user_name,
        provider_params=(
            {"response_modalities": ["TEXT", "IMAGE"]} if config.images.model_output else {}
        ),
    )
    budget = llm.context_tokens
    if budget is None and cloud:
        budget = CLOUD_CONTEXT_TOKENS
    toolbox = mcp_toolbox(config.tools)
    sink, notice, wav_path = _sink(config)
    return Parts(
        membrane,
        model_config,
        options,
        engine,
        sink,
        notice,
        wav_path,
        counter_for(membrane, budget),
        toolbox,
        blob_store,
    )


def image_tool_for(images: ImagesConfig) -> ImageTool | None:
    """The image tool the pipeline offers, its key and base URL checked now."""
    if images.tool is None:
        return None
    model = images.tool.partition(":")[2]
    where = f"images.tool {images.tool}"
    key = api_key("openai", where, images.api_key_env, section="images")
    check_base_url("openai", where, images.base_url, section="images")
    generator = OpenAIImages(
        model=model,
        size=images.size,
        quality=images.quality,
        partial_images=images.partial_images,
        api_key=key,
        base_url=images.base_url,
        timeout_s=images.timeout_s,
    )
    return ImageTool(generator)


def json_tools_for(llm: LlmConfig) -> Callable[[], JsonToolInterceptor] | None:
    """The reader of JSON tool calls in the reply's text, if the pipeline wants one."""
    if llm.tool_syntax == "xml":
        return None
    return partial(
        JsonToolInterceptor,
        mode=llm.json_tool_mode,
        max_hold=llm.json_tool_max_hold,
        placeholder=llm.json_tool_placeholder,
    )


def _with_recorded_tool_syntax(llm: LlmConfig, provider: object) -> LlmConfig:
    """A recording says how its model wrote tool calls: unless the pipeline says
    otherwise, its JSON calls are read as calls, never spoken."""
    source = getattr(provider, "source", None)
    if "tool_syntax" in llm.model_fields_set or not isinstance(source, ReplaySource):
        return llm
    return llm.model_copy(update={"tool_syntax": source.recording.tool_syntax})


def policies_for(config: PolicyConfig) -> Callable[[], list[StreamPolicy]] | None:
    """The pipeline's stream policies, made afresh for each reply (they keep state).
    Banned phrases are not among them: they are judged on the text as it will be
    said, by the chunker (``session_for``)."""
    allow = config.allow_tools
    if allow is None:
        return None

    def make() -> list[StreamPolicy]:
        return [ToolAllowList(allow)]

    return make


def mcp_toolbox(tools: ToolsConfig) -> McpToolbox | None:
    """The toolbox of the ``[[tools.mcp]]`` servers, or None without any. Header
    values are read from their variables now: a missing one is a ``ConfigError``."""
    if not tools.mcp:
        return None
    servers = [_mcp_server(server, n) for n, server in enumerate(tools.mcp)]
    return McpToolbox(servers, timeout_s=tools.timeout_s, connect_timeout_s=tools.connect_timeout_s)


def _mcp_server(config: McpServerConfig, n: int) -> McpServer:
    name = config.label(n)
    if config.command is not None:
        program, *arguments = config.command
        if program == "python":  # this interpreter: a server installed beside voice_membrane
            program = sys.executable
        return McpServer(
            name,
            command=(program, *arguments),
            env=config.env,
            cwd=config.cwd,
            tool_prefix=config.tool_prefix,
        )
    where = f"tools.mcp[{n}] ({name})"
    wanted = [(header, variable, "") for header, variable in config.headers_env.items()]
    if config.bearer_token_env:
        wanted.append(("Authorization", config.bearer_token_env, "Bearer "))
    headers: dict[str, str] = {}
    for header, variable, scheme in wanted:
        value = os.environ.get(variable, "")
        if not value:
            raise ConfigError(f"{where}: {variable} (the {header} header) is not set")
        problem = key_problem(value)
        if problem:
            raise ConfigError(f"{where}: the value of {variable} {problem}")
        remember(value)  # masked in every message and log from now on
        headers[header] = scheme + value
    return McpServer(name, url=config.url, headers=headers, tool_prefix=config.tool_prefix)


def _sink(config: PipelineConfig) -> tuple[AudioSink, str | None, str | None]:
    sink = config.sink
    kind = sink.kind
    notice = None
    if kind == "auto":
        reason = speaker_available(sink.backend)
        if reason is None:
            kind = "speaker"
        else:
            kind = "wav"
            notice = f"{reason}: writing the audio to {sink.path} instead"
    if kind == "speaker":
        return (
            create_sink(
                "speaker", backend=sink.backend, device=sink.device, sample_rate=SPEAKER_RATE
            ),
            notice,
            None,
        )
    if kind == "wav":
        problem = output_path_problem(sink.path)
        if problem:
            raise ConfigError(f"cannot write the audio to {sink.path}: {problem}")
        return create_sink("wav", path=sink.path), notice, sink.path
    return create_sink("null", sample_rate=SPEAKER_RATE, realtime=sink.realtime), notice, None


def output_path_problem(path: str | Path) -> str | None:
    """Why a file cannot be written at ``path`` (checked before a turn runs, so a
    typo does not cost the turn), or None. Permissions are left to the open."""
    path = Path(path)
    if path.is_dir():
        return "is a directory"
    if not path.parent.is_dir():
        return f"no such folder: {path.parent}"
    return None

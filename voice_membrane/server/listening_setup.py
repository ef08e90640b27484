"""A served session's listening parts, built when its client sends its voice:
the pipeline's STT engine (started now, closed with the session), its detector
or a push-to-talk button, and the endpointer, as a ``VoiceInput``."""

from __future__ import annotations

from contextlib import AsyncExitStack

from ..listening.engines import VadError
from ..pipeline.config import ConfigError, PipelineConfig
from ..pipeline.echo_intake import Where, echo_intake_for
from ..pipeline.listen_build import listener_for, push_to_talk_listener, stt_for
from ..pipeline.session import Session
from ..pipeline.vad_batch import loop_batcher
from ..stt.base import SttError
from . import protocol as p
from .voice_session import MAX_BACKLOG_FRAMES, VoiceHooks, VoiceInput


class ListeningFailed(RuntimeError):
    """The pipeline's listening parts would not start (one line)."""


def listens(config: PipelineConfig) -> bool:
    """The pipeline hears its users: it has an ``[stt]`` section."""
    return "stt" in config.model_fields_set


def check_listening(pipelines: dict[str, PipelineConfig]) -> None:
    """Each listening pipeline's ``[stt]`` as its sessions will make it (spec,
    key, base URL), at start-up: ``ConfigError`` in one line naming the
    pipeline, as a missing LLM key is, rather than a 1011 for every session
    that speaks. Nothing starts: no model loads, nothing is connected."""
    for name, config in pipelines.items():
        if listens(config):
            try:
                stt_for(config)
            except ConfigError as exc:
                raise ConfigError(f"pipeline {name}: {exc}") from None


async def voice_input_for(
    stack: AsyncExitStack,
    config: PipelineConfig,
    declared: p.InputAudio,
    turn_taking: p.TurnTaking,
    session: Session,
    hooks: VoiceHooks,
    where: Where = "browser",
) -> VoiceInput:
    """``where``: a phone call's input is echo-cancelled (``echo_intake.py``):
    ``VoiceInput.echo`` is then to be told what the sink sends."""
    try:
        stt = stt_for(config, input_rate=declared.sample_rate)  # a call: 8 kHz as it is
        await stt.start()
    except (ConfigError, SttError) as exc:
        raise ListeningFailed(f"speech to text: {exc}") from None
    stack.push_async_callback(stt.aclose)
    try:
        if turn_taking == "push_to_talk":
            listener, button = push_to_talk_listener(config, stt, MAX_BACKLOG_FRAMES)
            return VoiceInput(declared, session, listener, hooks, button)
        echo = echo_intake_for(config, where, stt.sample_rate)
        listener = listener_for(  # (the process's listeners' windows scored together)
            config,
            stt,
            input_rate=declared.sample_rate,
            vad_batch=loop_batcher(),
            backlog=MAX_BACKLOG_FRAMES,
            echo_cancelled=echo is not None,
        )
        return VoiceInput(declared, session, listener, hooks, echo=echo)
    except ConfigError as exc:
        raise ListeningFailed(str(exc)) from None
    except (VadError, ValueError) as exc:
        raise ListeningFailed(f"voice activity detector: {exc}") from None

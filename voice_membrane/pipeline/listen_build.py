"""A pipeline's listening parts: detector, speech-to-text engine and endpointer
(``[vad]``, ``[stt]``, ``[endpoint]``), made into a ``Listener``."""

from __future__ import annotations

from collections.abc import Callable

from ..listening.endpointer import Endpointer
from ..listening.engines import make_vad
from ..listening.playout import PHONE_RATE
from ..listening.push_to_talk import PushToTalk
from ..listening.turn_model import TurnModelError, load_turn_model
from ..stt.base import SttEngine, SttError
from ..stt.registry import create_stt, rate_options
from ..stt.retrying import RetryingStt
from .config import ConfigError, PipelineConfig
from .listening import BACKLOG_FRAMES, Listener
from .turn_judge import TurnJudge
from .vad_batch import VadBatcher

# With the echo cancelled, the warm-up the level judge needs goes: WebRTC's AEC3
# takes 20-35 dB of echo out in its first 0.5 s, and 56 answers at -20/-10 dB,
# 20-200 ms, with no warm-up at all paused none (tests/test_echo_canceller.py).
CANCELLED_WARMUP_S = 0.0


def stt_for(
    config: PipelineConfig,
    on_retry: Callable[[SttError, float], None] = lambda e, d: None,
    *,
    input_rate: int | None = None,
) -> SttEngine:
    """The engine ``[stt]`` names (not started); ``ConfigError`` in one line.
    ``input_rate``: the rate the audio arrives at (8000 on a call): an engine that
    takes it as it is is opened at it, so the listener runs at that rate and the
    engine converts for its model (check the engine's ``sample_rate``)."""
    stt = config.stt
    options: dict[str, object] = {} if stt.phrases is None else {"phrases": stt.phrases}
    if stt.final_window_s is not None:
        options["final_window_s"] = stt.final_window_s
    options.update(rate_options(stt.spec, input_rate))
    try:
        engine = create_stt(stt.spec, api_key_env=stt.api_key_env, base_url=stt.base_url, **options)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if stt.retry and not engine.local:
        return RetryingStt(engine, on_retry=on_retry)
    return engine


def listener_for(
    config: PipelineConfig,
    stt: SttEngine,
    *,
    input_rate: int | None = None,
    vad_batch: VadBatcher | None = None,
    backlog: int = BACKLOG_FRAMES,
    recording: bool = False,
    echo_cancelled: bool = False,
) -> Listener:
    """The listener over a started ``stt``: the detector at the engine's rate.
    ``input_rate``: the rate the audio arrives at; at 8 kHz (a call) the level
    pause's ``auto`` is on even when the engine takes 16 kHz (the 8 kHz sound
    upsampled is what the detector hears). ``vad_batch``: scores the detector's
    windows with other listeners' (many in one process). ``backlog``: the frames
    that may wait for it. ``recording``: the audio is a file (``run --input``),
    so speech going at its first sample is the user's, not a TV left on.
    ``echo_cancelled``: the input passes an echo canceller (``echo_intake.py``):
    all speech heard over the reply is the user's, from its first sample."""
    rate = stt.sample_rate
    endpoint = config.endpoint
    if echo_cancelled:
        endpoint = endpoint.model_copy(update={"echo": "aec", "echo_warmup_s": CANCELLED_WARMUP_S})
    if endpoint.level_pause == "auto" and input_rate is not None and input_rate <= PHONE_RATE:
        endpoint = endpoint.model_copy(update={"level_pause": "on"})
    vad_settings = config.vad
    if vad_settings.already_talking == "auto":
        who = "user" if recording else "background"
        vad_settings = vad_settings.model_copy(update={"already_talking": who})
    vad, endpointer = make_vad(vad_settings, rate), Endpointer(endpoint, rate)
    vad.watch_rises = endpointer.level_pause  # (the rises are for it alone)
    return Listener(vad, stt, endpointer, vad_batch, backlog, turn_judge_for(config, rate))


def turn_judge_for(config: PipelineConfig, sample_rate: int) -> TurnJudge | None:
    """The end-of-turn model ``[endpoint] turn_model`` names, at the listener's
    rate (None: none); ``ConfigError`` in one line when it cannot be loaded."""
    name = config.endpoint.turn_model
    if name == "none":
        return None
    try:
        return TurnJudge(load_turn_model(name), sample_rate)
    except TurnModelError as exc:
        raise ConfigError(str(exc)) from None


def push_to_talk_listener(
    config: PipelineConfig, stt: SttEngine, backlog: int = BACKLOG_FRAMES
) -> tuple[Listener, PushToTalk]:
    """A listener whose speech is what the user holds a button for (and the
    button, to press and release). The release ends the utterance: the turn
    starts on its final transcript, with no end silence to wait for; all that is
    heard while pressed is the user's (no echo guard), and no reply starts early."""
    rate = stt.sample_rate
    button = PushToTalk(rate)
    settings = config.endpoint.model_copy(
        update={
            "end_silence_s": 0.0,
            "unfinished_silence_s": 0.0,
            "preemptive": False,
            "echo": "aec",
            "turn_model": "none",  # (the release is the end)
        }
    )
    return Listener(button, stt, Endpointer(settings, rate), backlog=backlog), button

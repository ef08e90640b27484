"""From a validated pipeline file to the parts of a session."""

from __future__ import annotations

from dataclasses import dataclass

from ..providers.base import LlmSource
from ..providers.registry import create_source
from ..sinks.base import AudioSink
from ..sinks.registry import create_sink
from ..sinks.speaker import speaker_available
from ..tts.base import TtsEngine
from ..tts.registry import create_engine
from .config import ConfigError, PipelineConfig

SPEAKER_RATE = 22050  # the rate of both embedded voices; other rates are resampled


@dataclass(frozen=True, slots=True)
class Parts:
    source: LlmSource
    engine: TtsEngine
    sink: AudioSink
    notice: str | None  # something the user should be told once (a fallback taken)
    wav_path: str | None  # where the audio goes when the sink is a WAV file


def build_parts(config: PipelineConfig) -> Parts:
    """Create (not start) the source, engine and sink a pipeline names."""
    llm = config.llm
    try:
        source = create_source(
            llm.spec,
            model_path=llm.model_path,
            max_tokens=llm.max_tokens,
            temperature=llm.temperature,
            system_prompt=llm.system_prompt,
            replay_speed=llm.replay_speed,
        )
        engine = create_engine(config.tts.spec)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    sink, notice, wav_path = _sink(config)
    return Parts(source, engine, sink, notice, wav_path)


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
        return create_sink("wav", path=sink.path), notice, sink.path
    return create_sink("null"), notice, None

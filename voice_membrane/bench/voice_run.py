"""``bench --input``: voice-to-voice latency, file by file, through the real loop.

One session per target, as a user's: the STT engine is started once and hears
every file in turn (a recognizer adapts as it goes), after one typed warm-up
turn; the history is cleared before each file. Each file is played in real time
into ``converse``: wall-clock stamps, as a user at a microphone would see them
(fed faster, the decisions would be the same, but the end of speech would be
stamped before it "happened"). The reply goes to the null sink, not paced.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..infra.heap import settle_heap
from ..infra.redact import redact
from ..listening.wer import word_errors
from ..pipeline.build import build_parts, session_for
from ..pipeline.config import PipelineConfig
from ..pipeline.listen_build import listener_for, stt_for
from ..pipeline.voice_loop import VoiceTurn, converse
from ..sources.base import SourceError
from ..sources.wav_file import WavFileSource
from ..stt.base import SttError
from .prompts import WARM_UP_PROMPT
from .runner import STARTUP_ERRORS, one_line
from .stats import summarize
from .voice_inputs import VoiceInput
from .voice_timing import TimedStt

# The figures of a turn, in the table's order (ms after the end of the user's speech,
# but first_audio: after the request, as in the first-audio bench).
FIGURES = (
    ("endpointing_ms", "endpointing (end of speech → turn)"),
    ("transcript_final_ms", "final transcript"),
    ("request_ms", "request sent"),
    ("first_audio_ms", "first audio (after the request)"),
    ("voice_to_voice_ms", "voice to voice"),
)
# The end-of-turn model's own time for its last judgement: a figure of the turns
# it judged (none without a model).
MODEL_FIGURE = ("turn_model_ms", "end-of-turn model (per decision)")


@dataclass(frozen=True, slots=True)
class VoiceTarget:
    """A pipeline with ``[stt]``, ``[vad]``, ``[endpoint]``; ``finalize_s``: the
    scripted STT's own finalization time (``--scripted``), else None."""

    label: str
    config: PipelineConfig
    finalize_s: float | None = None


@dataclass(slots=True)
class FileSample:
    """One file heard: its turns (what was heard, the latency), the WER, the
    engine's settling times, or the error that stopped it."""

    input: VoiceInput
    turns: list[dict[str, Any]] = field(default_factory=list)
    heard: str = ""
    wer: float | None = None
    settle_ms: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def split(self) -> bool:
        """Heard as more or fewer turns than the fixture holds."""
        return self.error is None and len(self.turns) != self.input.utterances


@dataclass(slots=True)
class VoiceRun:
    target: VoiceTarget
    stt: str = ""
    llm: str = ""
    tts: str = ""
    files: list[FileSample] = field(default_factory=list)
    error: str | None = None
    open_s: float | None = None
    interrupted: bool = False  # Ctrl-C: the files heard before it

    def figures(self) -> dict[str, list[float]]:
        rows: dict[str, list[float]] = {}
        for sample in self.files:
            for turn in sample.turns:
                for name, _ in (*FIGURES, MODEL_FIGURE):
                    value = turn.get(name)
                    if value is not None:
                        rows.setdefault(name, []).append(value)
            rows.setdefault("settle_ms", []).extend(sample.settle_ms)
        finalize_s = self.target.finalize_s
        if finalize_s is not None:  # what our code adds over the fake's own finalization
            rows["stt_added_ms"] = [
                round(ms - finalize_s * 1000, 3) for ms in rows.get("settle_ms", [])
            ]
        return rows

    def ended_by(self) -> str:
        """Why the turns ended, most often first: ``silence 8``, ``model 7, silence 1``."""
        counts = Counter(
            str(t.get("endpoint_reason")) for sample in self.files for t in sample.turns
        )
        return ", ".join(f"{reason} {n}" for reason, n in counts.most_common()) or "—"

    def summary(self) -> dict[str, Any]:
        known = [s.wer for s in self.files if s.wer is not None]
        return {
            "label": self.target.label,
            "stt": self.stt,
            "llm": self.llm,
            "tts": self.tts,
            "error": self.error,
            "interrupted": self.interrupted,
            "open_s": None if self.open_s is None else round(self.open_s, 3),
            "files": len(self.files),
            "turns": sum(len(s.turns) for s in self.files),
            "errors": sum(1 for s in self.files if s.error is not None),
            "split": [s.input.name for s in self.files if s.split],
            "wer_mean": round(sum(known) / len(known), 4) if known else None,
            "ended_by": self.ended_by(),
            "finalize_s": self.target.finalize_s,
            "figures_ms": {name: summarize(values) for name, values in self.figures().items()},
        }


OnFile = Callable[[VoiceRun, FileSample], None]


def _listening(config: PipelineConfig) -> PipelineConfig:
    """A recording cannot hear the speaker (as ``run --input``): no echo to guard against."""
    if "echo" in config.endpoint.model_fields_set:
        return config
    return config.with_overrides({"endpoint": {"echo": "aec"}})


async def run_voice_target(
    target: VoiceTarget, inputs: Sequence[VoiceInput], on_file: OnFile = lambda r, f: None
) -> VoiceRun:
    """Every input heard in turn by one session of ``target`` (see the module)."""
    run = VoiceRun(target)
    config = _listening(target.config)
    started = time.perf_counter()
    try:
        stt = TimedStt(stt_for(config))
        await stt.start()
    except (SttError, *STARTUP_ERRORS) as exc:
        run.error = one_line(exc)
        return run
    try:
        parts = build_parts(config)
        session = session_for(config, parts, log=lambda record: None)
        async with session:
            run.open_s = time.perf_counter() - started
            run.stt, run.llm, run.tts = stt.name, session.membrane.provider.name, parts.engine.name
            await session.turn(WARM_UP_PROMPT)  # not counted: the model's first turn is slow
            settle_heap()
            for item in inputs:
                session.history.clear()  # each file a fresh conversation
                session.first_kept = 0
                sample = await _hear(config, stt, session, item)
                run.files.append(sample)
                on_file(run, sample)
    except STARTUP_ERRORS as exc:
        run.error = one_line(exc)
    finally:
        with anyio.CancelScope(shield=True):  # Ctrl-C: the recognizer still closes
            await stt.aclose()
    return run


async def _hear(
    config: PipelineConfig, stt: TimedStt, session: Any, item: VoiceInput
) -> FileSample:
    sample = FileSample(item)
    settled_before = len(stt.settle_ms)
    try:
        listener = listener_for(config, stt, recording=True)
        async with WavFileSource(item.path, rate=stt.sample_rate, realtime=True) as source:
            turns = await converse(session, listener, source.frames())
    except SourceError as exc:
        sample.error = redact(str(exc))
        return sample
    sample.turns = [_turn(turn) for turn in turns]
    sample.heard = " ".join(turn.heard.text for turn in turns)
    if item.text is not None:
        sample.wer = round(word_errors(item.text, sample.heard).wer, 4)
    sample.settle_ms = stt.settle_ms[settled_before:]
    errors = [turn.result.error for turn in turns if turn.result.error]
    if errors:
        sample.error = redact(errors[0])
    return sample


def _turn(turn: VoiceTurn) -> dict[str, Any]:
    report = turn.result.report
    latency = turn.latency.to_dict()
    return {
        "heard": turn.heard.text,
        "reason": turn.heard.reason,
        **latency,
        **({} if report.end is None else report.end.to_dict()),
        "first_audio_ms": report.first_audio_ms,
        "interrupted": report.interrupted,
    }

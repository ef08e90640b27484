"""Barge-in by voice, measured: the user speaks over the reply; how soon does
its audio stop, and does it come back when it should?

A spoken conversation in real time through the real loop (``converse``: Silero,
the endpointer, the pipeline's recognizer), the reply a long recording spoken by
espeak-ng into the real-time null sink (no output latency: a speaker adds 20 to
60 ms). A live user asks a question; then each round, once the reply has played
``echo_warmup_s`` plus a random part of a second, says "mm-hm" (the reply must
pause and resume) and, ``GAP_S`` later, "stop" (it must pause and be
interrupted; "stop" is the next turn, spoken over in the next round). Per clip,
from its speech onset (``voiced.py``, dated as a microphone captures it):
*pause*, when the reply's audio paused; *end*, when it resumed or was interrupted.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import soundfile as sf  # type: ignore[import-untyped]

from ..listening.decisions import Interrupt, PausePlayout, ResumePlayout
from ..pipeline.build import build_parts, session_for
from ..pipeline.config import PipelineConfig
from ..pipeline.listen_build import listener_for, stt_for
from ..pipeline.listening import BargeIn, ListenItem
from ..pipeline.session import Session
from ..pipeline.voice_loop import VoiceTurn, converse
from ..sources.base import Frame
from ..vocab.audio import Samples, resample
from .stats import summarize
from .voiced import voiced_bounds

SPEECH = Path(__file__).resolve().parents[2] / "audio_fixtures" / "speech"
QUESTION = SPEECH / "questions" / "weather_paris.wav"
CLIPS = {  # clip → what the reply must do
    "mm_hm": (SPEECH / "backchannels" / "mm_hm.wav", "resumed"),
    "stop": (SPEECH / "backchannels" / "stop.wav", "interrupted"),
}
GAP_S = 1.5  # after the backchannel's end, "stop"
FRAME_S = 0.02
RATE = 16_000
REPLY = (
    "Paris will be mild and mostly dry today. In the morning expect a light breeze from the "
    "west and a few clouds over the river, clearing before noon. The afternoon should be "
    "bright, with temperatures climbing to about nineteen degrees, so a light jacket is "
    "plenty. Towards the evening the wind drops and the sky stays clear, which makes it a "
    "good night for a walk along the quays. Tomorrow looks much the same, with perhaps a "
    "shower late in the day, and the weekend should be warmer still."
)


@dataclass
class Trial:
    """One clip said over the reply; times in ms from its speech onset."""

    clip: str
    expect: str
    onset_ns: int
    pause_ms: float | None = None
    end_ms: float | None = None
    outcome: str | None = None  # resumed | interrupted | None (nothing happened)

    @property
    def right(self) -> bool:
        return self.outcome == self.expect


@dataclass
class BargeInRun:
    trials: list[Trial] = field(default_factory=list)
    skipped: int = 0  # rounds whose reply had ended before the clip
    seconds: float = 0.0
    turns: list[VoiceTurn] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"skipped": self.skipped, "seconds": round(self.seconds, 1)}
        for clip, (_, expect) in CLIPS.items():
            trials = [t for t in self.trials if t.clip == clip]
            out[clip] = {
                "expect": expect,
                "trials": len(trials),
                "right": sum(t.right for t in trials),
                "outcomes": sorted({str(t.outcome) for t in trials}),
                "pause_ms": summarize([t.pause_ms for t in trials if t.pause_ms is not None]),
                "end_ms": summarize([t.end_ms for t in trials if t.end_ms is not None]),
            }
        return out


def clip_samples(path: Path) -> tuple[Samples, int]:
    """The clip at ``RATE``, and its speech onset (a sample index)."""
    data, rate = sf.read(path, dtype="int16", always_2d=True)
    samples = resample(np.ascontiguousarray(data[:, 0]), rate, RATE)
    try:
        return samples, voiced_bounds(samples, RATE)[0]
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


class LiveUser:
    """The user's voice, in real time, frame by frame: speaks when the reply
    has been playing long enough, as a person would; notes each clip's onset."""

    def __init__(self, session: Session, rounds: int, warmup_s: float, seed: int = 1) -> None:
        self.session, self.rounds, self.warmup_s = session, rounds, warmup_s
        self.random = random.Random(seed)
        self.run = BargeInRun()
        self._position = 0
        self._start = 0.0
        self._frame = round(RATE * FRAME_S)

    def playing_s(self) -> float | None:
        """How long the reply's audio has been playing (None: no reply playing)."""
        turn = self.session.current
        first = None if turn is None else turn.metrics.stamps.get("first_audio")
        return None if first is None else (time.perf_counter_ns() - first) / 1e9

    async def _emit(self, samples: Samples) -> AsyncIterator[Frame]:
        n = self._frame
        for i in range(0, len(samples), n):
            piece = samples[i : i + n]
            if len(piece) < n:
                piece = np.concatenate([piece, np.zeros(n - len(piece), dtype=np.int16)])
            await anyio.sleep_until(self._start + (self._position + n) / RATE)
            yield Frame(piece, RATE, position=self._position, captured_ns=time.perf_counter_ns())
            self._position += n

    def _silence(self, seconds: float) -> AsyncIterator[Frame]:
        return self._emit(np.zeros(round(seconds * RATE), dtype=np.int16))

    async def _say(self, clip: str) -> AsyncIterator[Frame]:
        path, expect = CLIPS[clip]
        samples, onset = clip_samples(path)
        onset_at = self._position + onset
        async for frame in self._emit(samples):
            if frame.position <= onset_at < frame.end:
                after = frame.end - onset_at
                onset_ns = frame.captured_ns - round(after * 1e9 / RATE)
                self.run.trials.append(Trial(clip, expect, onset_ns))
            yield frame

    async def frames(self) -> AsyncIterator[Frame]:
        self._start = anyio.current_time()
        for part in self._parts():
            async for frame in part:
                yield frame

    def _parts(self) -> Iterator[AsyncIterator[Frame]]:
        """What the user says, part by part: each is decided once the last has played."""
        yield self._emit(clip_samples(QUESTION)[0])
        for _ in range(self.rounds):
            wait = self.warmup_s + self.random.uniform(0.2, 1.0)
            while (playing := self.playing_s()) is None or playing < wait:
                yield self._silence(FRAME_S)
            yield self._say("mm_hm")
            yield self._silence(GAP_S)
            if self.playing_s() is None:
                self.run.skipped += 1
                continue
            yield self._say("stop")
            yield self._silence(1.0)  # "stop" becomes a turn
        self.session.interrupt()  # done: the last reply need not play out

    def on_item(self, item: ListenItem) -> None:
        """The barge-in decisions, dated as converse acts on them."""
        if not isinstance(item, BargeIn) or not self.run.trials:
            return
        now, trial = time.perf_counter_ns(), self.run.trials[-1]
        ms = round((now - trial.onset_ns) / 1e6, 3)
        decision = item.decision
        if isinstance(decision, PausePlayout) and trial.pause_ms is None:
            trial.pause_ms = ms
        elif isinstance(decision, ResumePlayout | Interrupt) and trial.outcome is None:
            trial.end_ms = ms
            trial.outcome = "resumed" if isinstance(decision, ResumePlayout) else "interrupted"


async def run_bargein(base: PipelineConfig, folder: Path, rounds: int = 8) -> BargeInRun:
    """``rounds`` of backchannel-then-stop over the reply (see the module)."""
    recording = folder / "long_reply.jsonl"  # the reply, 4 characters every 20 ms
    lines = [{"format": "voice-membrane-replay", "version": 1, "mode": "chat"}]
    lines += [{"t_ms": 100 + 5 * i, "text": REPLY[i : i + 4]} for i in range(0, len(REPLY), 4)]
    recording.write_text("".join(json.dumps(line) + "\n" for line in lines))
    config = base.with_overrides(
        {
            "llm": {"spec": f"replay:{recording}"},
            "tts": {"spec": "espeak"},
            "sink": {"kind": "null", "realtime": True},
            "endpoint": {"echo": "aec"},  # no echo path here: the null sink is not heard
        }
    )
    started = time.perf_counter()
    stt = stt_for(config)
    await stt.start()
    try:
        parts = build_parts(config)
        session = session_for(config, parts, log=lambda record: None)
        async with session:
            user = LiveUser(session, rounds, config.endpoint.echo_warmup_s)
            listener = listener_for(config, stt)
            user.run.turns = await converse(session, listener, user.frames(), on_item=user.on_item)
    finally:
        await stt.aclose()
    user.run.seconds = time.perf_counter() - started
    return user.run

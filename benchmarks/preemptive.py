"""Preemptive replies on the embedded loop: local-voice (whisper tiny.en → SmolLM2 →
Piper) with ``[endpoint] preemptive`` on and off, over the 8 Piper questions and
``mid_pause.wav`` (whose pause after a number makes a held reply that must be
thrown away), played in real time into ``converse`` with a real-time null sink
(a held reply needs a sink that can hold; first audio is when its clock plays
the first sample). One session per setting, one typed warm-up turn, the history
cleared before each file, as ``voice`` does.

``python -m benchmarks.preemptive`` runs it alone and prints its table.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from benchmarks.table import Column, Table
from voice_membrane.bench.prompts import WARM_UP_PROMPT
from voice_membrane.bench.stats import Spread
from voice_membrane.bench.voice_command import LOCAL_VOICE
from voice_membrane.bench.voice_inputs import SPEECH, VoiceInput, default_inputs, voice_inputs
from voice_membrane.pipeline.build import build_parts, session_for
from voice_membrane.pipeline.config import PipelineConfig, load_pipeline
from voice_membrane.pipeline.listen_build import listener_for, stt_for
from voice_membrane.pipeline.voice_loop import VoiceTurn, converse
from voice_membrane.sources.wav_file import WavFileSource

REALTIME_NULL = {"kind": "null", "realtime": True}
MAX_TOKENS = 24  # first audio needs the first piece; the reply plays in real time


@dataclass
class PreemptRun:
    preemptive: bool
    turns: list[dict[str, Any]] = field(default_factory=list)
    discarded: int = 0  # held replies thrown away, over every file
    discarded_tokens: int = 0
    seconds: float = 0.0


def inputs() -> list[VoiceInput]:
    return default_inputs() + voice_inputs([SPEECH / "mid_pause.wav"])


def config_for(preemptive: bool) -> PipelineConfig:
    return load_pipeline(LOCAL_VOICE).with_overrides(
        {
            "sink": REALTIME_NULL,
            "llm": {"max_tokens": MAX_TOKENS},
            "endpoint": {"preemptive": preemptive, "echo": "aec"},  # a file hears no echo
        }
    )


async def run_preemptive(preemptive: bool, files: list[VoiceInput]) -> PreemptRun:
    run = PreemptRun(preemptive)
    started = time.perf_counter()
    config = config_for(preemptive)
    stt = stt_for(config)
    await stt.start()
    try:
        session = session_for(config, build_parts(config), log=lambda record: None)
        async with session:
            await session.turn(WARM_UP_PROMPT)  # not counted
            for item in files:
                session.history.clear()
                session.first_kept = 0
                heard: list[VoiceTurn] = []
                listener = listener_for(config, stt, recording=True)
                async with WavFileSource(item.path, rate=stt.sample_rate, realtime=True) as src:
                    await converse(session, listener, src.frames(), on_turn=heard.append)
                for turn in heard:
                    run.turns.append({"file": item.name, **turn.latency.to_dict()})
                if heard:
                    run.discarded += heard[-1].discarded.replies
                    run.discarded_tokens += heard[-1].discarded.tokens
    finally:
        await stt.aclose()
    run.seconds = time.perf_counter() - started
    return run


def run_preemptive_bench() -> dict[bool, PreemptRun]:
    files = inputs()
    return {on: anyio.run(run_preemptive, on, files) for on in (True, False)}


def _ms(name: str) -> Callable[[PreemptRun], str]:
    """A figure's p50 / p95 over a run's turns."""
    return lambda run: Spread().cell([t[name] for t in run.turns if t[name] is not None])


TABLE = Table[PreemptRun](
    [
        Column("preemptive", lambda r: "on" if r.preemptive else "off"),
        Column(
            "turns (held and kept)",
            lambda r: f"{len(r.turns)} ({sum(1 for t in r.turns if t['preemptive'])})",
        ),
        Column(
            "held replies thrown away (LLM deltas)",
            lambda r: f"{r.discarded} ({r.discarded_tokens})",
        ),
        Column("endpointing", _ms("endpointing_ms")),
        Column("request", _ms("request_ms")),
        Column("voice to voice", _ms("voice_to_voice_ms")),
    ]
)


def preemptive_table(runs: dict[bool, PreemptRun]) -> str:
    """On first, then off."""
    return TABLE.render(run for _, run in sorted(runs.items(), reverse=True))


if __name__ == "__main__":
    runs = run_preemptive_bench()
    print(preemptive_table(runs))
    for run in runs.values():
        print(run.preemptive, f"{run.seconds:.0f} s")
        for turn in run.turns:
            print("  ", turn)

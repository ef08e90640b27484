"""First-audio benchmark: warm latency of the embedded pipelines, measured by the
``voice-membrane bench`` command's engine (``voice_membrane.bench.runner``). Each
setup is a ``Target``: a shipped pipeline file with ``OVERRIDES`` and at most one
change, run in ``SESSIONS`` sessions that take turns with the other setups'
(``run_targets``); ``first_audio_report`` renders the results."""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from voice_membrane.bench.command import NULL_SINK
from voice_membrane.bench.prompts import DEFAULT_PROMPTS, WARM_UP_PROMPT
from voice_membrane.bench.runner import Target, TargetRun, merge_runs, run_target
from voice_membrane.pipeline.config import DEFAULT_PIPELINE, load_pipeline

REQUIRED_MODULES = ("llama_cpp", "piper")  # without either, the benchmark is not run
PIPELINE_DEFAULT = DEFAULT_PIPELINE  # pipelines/local.toml: LocalLlama + Piper
PIPELINE_ESPEAK = DEFAULT_PIPELINE.with_name("local-espeak.toml")  # LocalLlama + espeak-ng
MAX_TOKENS = 40  # local.toml says 120; first audio does not depend on it, run time does
SEED = 7  # fixed, so every setup hears the same reply to the same prompt
# Every setup's, on top of its pipeline file.
OVERRIDES: dict[str, dict[str, Any]] = {
    "llm": {"max_tokens": MAX_TOKENS, "seed": SEED},
    "sink": NULL_SINK,
}
SESSIONS = 2  # per setup; the prompts are split between them
WARM_UP_TURNS = 1  # per session, not counted
# Targets of issue 16 ("embedded first audio near its limit") and the pipeline's own.
TARGET_FIRST_AUDIO_P50_MS = 250.0  # the embedded default, on 2 cores
TARGET_FIRST_AUDIO_P95_MS = 350.0
TARGET_ESPEAK_P50_MS = 120.0
TARGET_ADDED_MS = 5.0  # what the pipeline adds, p50

# The command's own prompt set: both measure the same questions.
PROMPTS = DEFAULT_PROMPTS


@dataclass(frozen=True, slots=True)
class Setup:
    """One pipeline to measure: a pipeline file with ``OVERRIDES`` and ``change``."""

    label: str
    pipeline: Path
    change: tuple[tuple[str, str, Any], ...] = ()  # (section, key, value)
    option: str = ""  # the change, as a user would make it ("" for a pipeline as shipped)

    def target(self) -> Target:
        overrides = {section: dict(values) for section, values in OVERRIDES.items()}
        for section, key, value in self.change:
            overrides.setdefault(section, {})[key] = value
        return Target(self.label, load_pipeline(self.pipeline).with_overrides(overrides))


DEFAULT_SETUP = Setup("default: LocalLlama + Piper", PIPELINE_DEFAULT)
ESPEAK_SETUP = Setup(
    "espeak: LocalLlama + espeak-ng",
    PIPELINE_ESPEAK,
    option="the espeak-ng voice (`--pipeline pipelines/local-espeak.toml`)",
)
# One change each to the default pipeline: what moves its first-audio latency.
NO_PRIORITY_SETUP = Setup(
    "default, first-audio priority off",
    PIPELINE_DEFAULT,
    (("scheduling", "first_audio_priority", False),),
    '`[scheduling] first_audio_priority = false` (default "auto": on for two local engines)',
)
ONE_LLM_THREAD_SETUP = Setup(
    "default, LLM on 1 thread",
    PIPELINE_DEFAULT,
    (("scheduling", "llm_threads", 1),),
    "`[scheduling] llm_threads = 1` (default: every core)",
)
ONE_TTS_THREAD_SETUP = Setup(
    "default, Piper on 1 thread",
    PIPELINE_DEFAULT,
    (("scheduling", "tts_threads", 1),),
    "`[scheduling] tts_threads = 1` (default: every core)",
)
TWO_WORDS_SETUP = Setup(
    "default, first piece of 2 words",
    PIPELINE_DEFAULT,
    (("chunker", "first_chunk_words", 2),),
    "`[chunker] first_chunk_words = 2` (default 3)",
)
OPTION_SETUPS = (NO_PRIORITY_SETUP, ONE_LLM_THREAD_SETUP, ONE_TTS_THREAD_SETUP, TWO_WORDS_SETUP)
SETUPS = (DEFAULT_SETUP, ESPEAK_SETUP, *OPTION_SETUPS)


@dataclass(frozen=True, slots=True)
class FirstAudioResults:
    setups: Sequence[Setup]
    runs: list[TargetRun]  # in ``setups`` order
    load_before: float  # 1-minute load average just before the benchmark started
    load_after: float
    seconds: float  # wall time of the whole benchmark
    cpus: int
    prompts: Sequence[str] = PROMPTS

    def run(self, setup: Setup) -> TargetRun | None:
        """``setup``'s run (None if it was not among those run); by label, so
        results saved in another checkout (``--load``) still find theirs."""
        runs = zip(self.setups, self.runs, strict=True)
        return next((run for s, run in runs if s.label == setup.label), None)


def run_targets(
    targets: Sequence[Target], prompts: Sequence[str], sessions: int = SESSIONS
) -> list[TargetRun]:
    """Each target in ``sessions`` sessions, one at a time, each in its own event loop,
    on every ``sessions``-th prompt; the targets take turns, in reverse order every
    other round. A target that cannot start is not tried again."""
    # One session at a time, each in its own event loop, has the process's CPUs to itself
    # as `voice-membrane run` does. (Sessions taking turns within one loop would share
    # anyio's worker threads, and a Piper session's threads slow the others' LLM.)
    done: list[list[TargetRun]] = [[] for _ in targets]
    order = list(range(len(targets)))
    for index in range(sessions):
        share = prompts[index::sessions]
        for k in order if index % 2 == 0 else order[::-1]:
            if share and not any(run.error is not None for run in done[k]):
                done[k].append(anyio.run(_session, targets[k], share))
    return [merge_runs(runs) if runs else TargetRun(targets[k]) for k, runs in enumerate(done)]


async def _session(target: Target, prompts: Sequence[str]) -> TargetRun:
    return await run_target(
        target,
        prompts,
        turns=len(prompts),
        warmup=WARM_UP_TURNS,
        concurrency=1,
        warm_up_prompt=WARM_UP_PROMPT,
        alone_each_turn=True,  # each turn's limit from its own first piece
    )


def run_first_audio_bench(
    setups: Sequence[Setup] = SETUPS, prompts: Sequence[str] = PROMPTS
) -> FirstAudioResults:
    """Run every setup; ``ImportError`` when llama.cpp or Piper is not installed."""
    for module in REQUIRED_MODULES:
        if importlib.util.find_spec(module) is None:
            raise ImportError(f"No module named {module!r}")
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    runs = run_targets([setup.target() for setup in setups], prompts)
    return FirstAudioResults(
        setups=setups,
        runs=runs,
        load_before=load_before,
        load_after=os.getloadavg()[0],
        seconds=time.perf_counter() - started,
        cpus=os.cpu_count() or 1,
        prompts=prompts,
    )

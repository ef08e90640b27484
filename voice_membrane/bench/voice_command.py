"""``voice-membrane bench --input [FILE.wav|FOLDER …]``: voice-to-voice latency
per pipeline (``voice_run.py``), printed as the first-audio bench prints its
tables, and written as JSON."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from ..pipeline.build import output_path_problem
from ..pipeline.config import DEFAULT_PIPELINE, ConfigError, PipelineConfig, load_pipeline
from .report import write_json
from .voice_inputs import VoiceInput, default_inputs, voice_inputs
from .voice_report import files_table, voice_heading, voice_json, voice_table
from .voice_run import FileSample, VoiceRun, VoiceTarget, run_voice_target

LOCAL_VOICE = DEFAULT_PIPELINE.parent / "local-voice.toml"
NULL_SINK = {"kind": "null", "realtime": False}  # as the first-audio bench (docs/bench.md)


@dataclass(frozen=True, slots=True)
class VoiceBenchOptions:
    inputs: Sequence[Path] = ()  # none: the shipped Piper questions
    pipelines: Sequence[Path] = ()  # none: pipelines/local-voice.toml
    scripted: bool = False
    json: Path | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def check(self) -> list[VoiceInput]:
        """The inputs; ``ConfigError`` (one line) for options that cannot run."""
        if self.scripted and self.pipelines:
            raise ConfigError("--input --scripted brings its own pipeline: drop --pipeline")
        problem = self.json and output_path_problem(self.json)
        if problem:
            raise ConfigError(f"--json {self.json}: {problem}")
        return voice_inputs(list(self.inputs)) if self.inputs else default_inputs()


@contextlib.contextmanager
def voice_targets(
    options: VoiceBenchOptions, inputs: Sequence[VoiceInput]
) -> Iterator[list[VoiceTarget]]:
    if options.scripted:
        from .voice_scripted import scripted_voice_target

        with scripted_voice_target(inputs, load_pipeline(LOCAL_VOICE)) as target:
            yield [target]
        return
    targets = []
    for path in options.pipelines or [LOCAL_VOICE]:
        config = load_pipeline(path).with_overrides({"sink": NULL_SINK})
        targets.append(VoiceTarget(path.stem, config))
    yield targets


async def run_voice_bench(
    options: VoiceBenchOptions,
    inputs: Sequence[VoiceInput],
    targets: Sequence[VoiceTarget],
    console: Console,
) -> list[VoiceRun]:
    """Every target in turn (never two at once), its tables printed when done."""
    runs = []
    for target in targets:
        run = await run_voice_target(target, inputs, on_file=lambda r, f: _progress(console, f))
        runs.append(run)
        print_voice_run(console, run)
    if options.json is not None:
        write_json(options.json, voice_json(runs, options.settings))
    return runs


def _progress(console: Console, sample: FileSample) -> None:
    if console.is_terminal:
        console.print(f"  {sample.input.name}: {sample.heard or sample.error or '—'}", markup=False)


def print_voice_run(console: Console, run: VoiceRun) -> None:
    if run.error is not None:
        console.print(f"{run.target.label}: not measured: {run.error}", markup=False)
        return
    console.print(voice_heading(run), markup=False, highlight=False, soft_wrap=True)
    console.print(voice_table(run))
    console.print(files_table(run))


def with_endpoint(config: PipelineConfig, **endpoint: float) -> PipelineConfig:
    """``config`` with ``[endpoint]`` settings changed (the tuning runs)."""
    return config.with_overrides({"endpoint": endpoint})

"""``voice-membrane bench --input [FILE.wav|FOLDER …]``: voice-to-voice latency
per pipeline (``voice_run.py``), run, printed and written as the first-audio
bench's (``command.py``); Ctrl-C keeps the files heard."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from ..pipeline.config import DEFAULT_PIPELINE, ConfigError, PipelineConfig, load_pipeline
from .command import NULL_SINK as NULL_SINK  # (benchmarks/ import it from here)
from .command import check_outputs, measure_each, say, write_outputs
from .page import voice_page
from .report import files_table, voice_heading, voice_json, voice_table
from .voice_inputs import VoiceInput, default_inputs, voice_inputs
from .voice_run import FileSample, VoiceRun, VoiceTarget, run_voice_target

LOCAL_VOICE = DEFAULT_PIPELINE.parent / "local-voice.toml"


@dataclass(frozen=True, slots=True)
class VoiceBenchOptions:
    inputs: Sequence[Path] = ()  # none: the shipped Piper questions
    pipelines: Sequence[Path] = ()  # none: pipelines/local-voice.toml
    scripted: bool = False
    json: Path | None = None
    html: Path | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def check(self) -> list[VoiceInput]:
        """The inputs; ``ConfigError`` (one line) for options that cannot run."""
        if self.scripted and self.pipelines:
            raise ConfigError("--input --scripted brings its own pipeline: drop --pipeline")
        check_outputs(self.json, self.html)
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
    """Every target in turn (``measure_each``), its tables printed when done;
    Ctrl-C (SIGINT) stops the file being heard and keeps the files heard."""

    async def measure(target: VoiceTarget, current: list[VoiceRun]) -> VoiceRun:
        def on_file(run: VoiceRun, sample: FileSample) -> None:
            current[:] = [run]
            _progress(console, sample)

        return await run_voice_target(target, inputs, on_file=on_file)

    of = f"{len(inputs) * len(targets)} files"
    show = partial(_print_run, console)
    runs, stopped = await measure_each(
        targets, measure, show, lambda run: len(run.files), of, "any file was heard"
    )
    write_outputs(
        options.json, options.html, voice_json, voice_page, runs, options.settings, stopped
    )
    return runs


def _progress(console: Console, sample: FileSample) -> None:
    if console.is_terminal:
        console.print(f"  {sample.input.name}: {sample.heard or sample.error or '—'}", markup=False)


def _print_run(console: Console, run: VoiceRun) -> None:
    if run.error is not None:
        console.print(f"{run.target.label}: not measured: {run.error}", markup=False)
        return
    say(console, voice_heading(run))
    console.print(voice_table(run))
    console.print(files_table(run))


def with_endpoint(config: PipelineConfig, **endpoint: float) -> PipelineConfig:
    """``config`` with ``[endpoint]`` settings changed (the tuning runs)."""
    return config.with_overrides({"endpoint": endpoint})

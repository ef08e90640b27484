"""``voice-membrane bench --input [FILE.wav|FOLDER …]``: voice-to-voice latency
per pipeline (``voice_run.py``), printed as the first-audio bench prints its
tables, and written as JSON and HTML; Ctrl-C keeps the files heard, as there."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

from ..pipeline.build import output_path_problem
from ..pipeline.config import DEFAULT_PIPELINE, ConfigError, PipelineConfig, load_pipeline
from .command import BenchInterrupted, interrupts, stop_on_sigint
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
    html: Path | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def check(self) -> list[VoiceInput]:
        """The inputs; ``ConfigError`` (one line) for options that cannot run."""
        if self.scripted and self.pipelines:
            raise ConfigError("--input --scripted brings its own pipeline: drop --pipeline")
        for flag, path in (("--json", self.json), ("--html", self.html)):
            problem = path and output_path_problem(path)
            if problem:
                raise ConfigError(f"{flag} {path}: {problem}")
        if self.html is not None:
            from .plots import require_matplotlib

            require_matplotlib()  # before any file is heard, not after the whole run
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
    """Every target in turn (never two at once), its tables printed when done.

    Ctrl-C (SIGINT) stops the file being heard; the files heard are kept: the
    tables printed and the files written, marked interrupted, then
    ``BenchInterrupted`` (nothing written when no file had been heard)."""
    runs: list[VoiceRun] = []
    current: list[VoiceRun] = []  # the target being measured, once a file is heard
    stopped = anyio.Event()

    def on_file(run: VoiceRun, sample: FileSample) -> None:
        current[:] = [run]
        _progress(console, sample)

    with interrupts() as signals:
        async with anyio.create_task_group() as tg:
            if signals is not None:
                tg.start_soon(stop_on_sigint, signals, tg.cancel_scope, stopped)
            for target in targets:
                current.clear()
                run = await run_voice_target(target, inputs, on_file=on_file)
                runs.append(run)
                print_voice_run(console, run)
            tg.cancel_scope.cancel()
    settings = options.settings
    if stopped.is_set():
        if current and current[0] not in runs:
            current[0].interrupted = True
            print_voice_run(console, current[0])
            runs.append(current[0])
        done = sum(len(run.files) for run in runs)
        if done == 0:
            raise BenchInterrupted("interrupted before any file was heard")
        settings = {
            **settings,
            "interrupted": f"after {done} of {len(inputs) * len(targets)} files",
        }
    write_voice_reports(options, runs, settings)
    if stopped.is_set():
        raise BenchInterrupted(f"interrupted {settings['interrupted']}")
    return runs


def write_voice_reports(
    options: VoiceBenchOptions, runs: Sequence[VoiceRun], settings: dict[str, Any]
) -> None:
    """``--json`` and ``--html``, when asked for."""
    if options.json is not None:
        write_json(options.json, voice_json(list(runs), settings))
    if options.html is not None:
        from .page import write_html
        from .voice_page import voice_page

        write_html(options.html, voice_page(runs, settings))


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

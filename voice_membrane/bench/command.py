"""`voice-membrane bench`: the targets, the run with its progress bar, the output."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from websockets.exceptions import InvalidURI
from websockets.uri import parse_uri

from ..pipeline.build import output_path_problem
from ..pipeline.config import DEFAULT_PIPELINE, ConfigError, PipelineConfig, load_pipeline
from .prompts import DEFAULT_PROMPTS, WARM_UP_PROMPT, load_prompts
from .remote import run_remote
from .report import bench_json, target_heading, target_table, write_json
from .runner import Target, TargetRun, TurnSample, run_target
from .stats import nearest_rank

# Every target's audio goes to the null sink, not paced to real time: first_audio is
# when it takes the first sample, as a speaker's callback would (docs/bench.md).
NULL_SINK = {"kind": "null", "realtime": False}


@dataclass(frozen=True, slots=True)
class BenchOptions:
    pipelines: Sequence[Path] = ()
    llms: Sequence[str] = ()
    ttss: Sequence[str] = ()
    prompts: Path | None = None
    turns: int = 20
    warmup: int = 1
    concurrency: int = 1
    json: Path | None = None
    html: Path | None = None
    scripted: bool = False
    url: str | None = None  # a running serve endpoint; --pipeline then names its pipelines
    token: str | None = field(default=None, repr=False)
    settings: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """``ConfigError`` (one line) for options that cannot run."""
        if self.turns < 1:
            raise ConfigError("--turns must be ≥ 1")
        if self.warmup < 0:
            raise ConfigError("--warmup must be ≥ 0")
        if self.concurrency < 1:
            raise ConfigError("--concurrency must be ≥ 1")
        if self.scripted and (self.pipelines or self.llms or self.ttss):
            raise ConfigError("--scripted brings its own pipelines: drop --pipeline, --llm, --tts")
        if self.url is not None:
            if not self.url.startswith(("ws://", "wss://")):
                raise ConfigError(f"--url {self.url}: a ws:// or wss:// address")
            try:
                parse_uri(self.url)
            except (InvalidURI, ValueError) as exc:
                raise ConfigError(f"--url {self.url}: {exc}") from None
            if self.scripted or self.llms or self.ttss:
                raise ConfigError(
                    "--url measures the server's own pipelines: drop --llm, --tts, --scripted"
                )
        for flag, path in (("--json", self.json), ("--html", self.html)):
            problem = path and output_path_problem(path)
            if problem:
                raise ConfigError(f"{flag} {path}: {problem}")
        if self.html is not None:
            from .plots import require_matplotlib

            require_matplotlib()  # before any turn runs, not after the whole run


def pipeline_targets(options: BenchOptions) -> list[Target]:
    """Every pipeline file, or every ``--llm`` x ``--tts`` combination on each of
    them (the default pipeline when none is given), with the null sink."""
    targets = []
    llms: list[str | None] = [*options.llms] or [None]  # None: the file's own
    ttss: list[str | None] = [*options.ttss] or [None]
    for path in options.pipelines or [DEFAULT_PIPELINE]:
        config = load_pipeline(path)
        for llm in llms:
            for tts in ttss:
                changed = config.with_overrides({"llm": {"spec": llm}, "tts": {"spec": tts}})
                label = " ".join(
                    [path.stem] + ([f"llm={llm}"] if llm else []) + ([f"tts={tts}"] if tts else [])
                )
                targets.append(Target(label, _null_sink(changed)))
    return targets


def _null_sink(config: PipelineConfig) -> PipelineConfig:
    return config.with_overrides({"sink": NULL_SINK})


@contextlib.contextmanager
def targets_for(options: BenchOptions) -> Iterator[list[Target]]:
    if options.url is not None:
        names: list[str | None] = [str(name) for name in options.pipelines] or [None]
        yield [
            Target(
                options.url if name is None else f"{options.url} pipeline={name}",
                None,
                url=options.url,
                server_pipeline=name,
            )
            for name in names
        ]
    elif options.scripted:
        from .scripted import scripted_targets

        with scripted_targets() as targets:
            yield targets
    else:
        yield pipeline_targets(options)


def bench_prompts(options: BenchOptions) -> list[str]:
    """``--prompts``' (``ConfigError``, one line, for a bad file) or the default set."""
    return list(DEFAULT_PROMPTS) if options.prompts is None else load_prompts(options.prompts)


class BenchInterrupted(Exception):
    """Ctrl-C stopped the run: what was finished is printed and written; the
    message says how much (``interrupted after N of M turns``)."""


async def run_bench(
    options: BenchOptions, prompts: Sequence[str], targets: Sequence[Target], console: Console
) -> list[TargetRun]:
    """Every target in turn (never two at once: they would share the CPU), its
    progress shown on a terminal, its table printed when it is done.

    Ctrl-C (SIGINT) cancels the running turn; the turns finished are kept: the
    tables are printed and the files written as for a whole run, marked
    interrupted, then ``BenchInterrupted`` is raised (nothing is written when
    no turn had finished)."""
    runs: list[TargetRun] = []
    partial_run: list[TargetRun] = []  # the target being measured, once a turn is done
    stopped = anyio.Event()
    with interrupts() as signals:
        async with anyio.create_task_group() as tg:
            if signals is not None:
                tg.start_soon(stop_on_sigint, signals, tg.cancel_scope, stopped)
            await _measure(options, prompts, targets, console, runs, partial_run)
            tg.cancel_scope.cancel()
    settings = options.settings
    if stopped.is_set():
        if partial_run and partial_run[0] not in runs:
            partial_run[0].interrupted = True
            _print_run(console, partial_run[0])
            runs.append(partial_run[0])
        done = sum(len(run.turns) for run in runs)
        if done == 0:
            raise BenchInterrupted("interrupted before any turn finished")
        marker = f"after {done} of {options.turns * len(targets)} turns"
        settings = {**settings, "interrupted": marker}
    if options.json is not None:
        write_json(options.json, bench_json(runs, settings))
    if options.html is not None:
        from .page import bench_page, write_html

        write_html(options.html, bench_page(runs, settings))
    if stopped.is_set():
        raise BenchInterrupted(f"interrupted {settings['interrupted']}")
    return runs


@contextlib.contextmanager
def interrupts() -> Iterator[Any]:
    """SIGINT as a stream, or None off the main thread (an embedding app's worker
    thread: Python delivers signals only to the main one, and will not listen
    elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        yield signals


async def stop_on_sigint(signals: Any, scope: anyio.CancelScope, stopped: anyio.Event) -> None:
    async for _ in signals:
        stopped.set()
        scope.cancel()  # the running turn is cancelled; its session closes cleanly
        return


async def _measure(
    options: BenchOptions,
    prompts: Sequence[str],
    targets: Sequence[Target],
    console: Console,
    runs: list[TargetRun],
    partial_run: list[TargetRun],
) -> None:
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("first audio p50 {task.fields[p50]}  errors {task.fields[errors]}"),
        console=console,
        disable=not console.is_terminal,  # quiet in a pipe or a log file
    )
    with progress:
        for target in targets:
            task = progress.add_task(target.label, total=options.turns, p50="—", errors=0)
            partial_run.clear()
            on_turn = partial(_advance, progress, task, partial_run)
            # A running server is measured as its client; a pipeline, in process.
            measure = run_target if target.url is None else partial(run_remote, token=options.token)
            run = await measure(
                target,
                prompts,
                turns=options.turns,
                warmup=options.warmup,
                concurrency=options.concurrency,
                warm_up_prompt=WARM_UP_PROMPT,
                on_turn=on_turn,
            )
            runs.append(run)
            if run.error is not None:
                progress.update(task, visible=False)
            _print_run(console, run)


def _print_run(console: Console, run: TargetRun) -> None:
    if run.error is not None:
        console.print(
            f"{run.target.label}: not measured: {run.error}",
            markup=False,
            highlight=False,
            soft_wrap=True,  # one line, however long
        )
        return
    console.print(target_heading(run), markup=False, highlight=False, soft_wrap=True)
    console.print(target_table(run))
    failed = [turn.error for turn in run.turns if turn.error is not None]
    if failed:
        console.print(
            f"{run.target.label}: {len(failed)} of {len(run.turns)} turns failed, "
            f"the first: {failed[0]}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def _advance(
    progress: Progress, task: TaskID, current: list[TargetRun], run: TargetRun, turn: TurnSample
) -> None:
    current[:] = [run]
    values = [t.report.first_audio_ms for t in run.counted if t.report is not None]
    shown = [v for v in values if v is not None]
    p50 = f"{nearest_rank(shown, 0.5):.0f} ms" if shown else "—"
    progress.update(task, advance=1, p50=p50, errors=run.errors)


def console() -> Console:
    """The terminal's width on a terminal; wide enough for the tables elsewhere."""
    terminal = Console()
    return terminal if terminal.is_terminal else Console(width=120)

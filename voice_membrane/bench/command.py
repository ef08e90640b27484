"""`voice-membrane bench`: its targets measured one after another, Ctrl-C keeping
what was finished, the outputs written (``--input``'s face, ``voice_command.py``,
runs on the same); and the first-audio face: the targets from the flags, the
progress bar, the tables."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from websockets.exceptions import InvalidURI
from websockets.uri import parse_uri

from ..pipeline.build import output_path_problem
from ..pipeline.config import DEFAULT_PIPELINE, ConfigError, load_pipeline
from .page import bench_page
from .plots import require_matplotlib
from .prompts import DEFAULT_PROMPTS, WARM_UP_PROMPT, load_prompts
from .remote import run_remote
from .report import bench_json, target_heading, target_table, write_json, write_output
from .runner import Target, TargetRun, TurnSample, run_target
from .stats import nearest_rank

# Every target's audio goes to the null sink, not paced to real time: first_audio is
# when it takes the first sample, as a speaker's callback would (docs/bench.md).
NULL_SINK = {"kind": "null", "realtime": False}


class BenchInterrupted(Exception):
    """Ctrl-C stopped the run: what was finished is printed and written; the
    message says how much (``interrupted after N of M turns``)."""


class _Run(Protocol):
    interrupted: bool


T = TypeVar("T")
R = TypeVar("R", bound=_Run)


def check_outputs(json: Path | None, html: Path | None) -> None:
    """``ConfigError`` (one line) for ``--json`` or ``--html`` paths that cannot be
    written, or ``--html`` without matplotlib: before anything is measured."""
    for flag, path in (("--json", json), ("--html", html)):
        problem = path and output_path_problem(path)
        if problem:
            raise ConfigError(f"{flag} {path}: {problem}")
    if html is not None:
        require_matplotlib()


async def measure_each(
    targets: Sequence[T],
    measure: Callable[[T, list[R]], Awaitable[R]],
    show: Callable[[R], None],
    size: Callable[[R], int],
    of: str,
    nothing: str,
    live: contextlib.AbstractContextManager[Any] | None = None,
) -> tuple[list[R], str | None]:
    """Every target in turn (never two at once: they would share the CPU), each
    shown when done; with how much was done when Ctrl-C stopped the run
    (``after N of`` ``of``), else None. ``measure`` keeps its run in the list it
    is given once it holds something, so that Ctrl-C keeps it too (marked
    interrupted); ``BenchInterrupted`` (``interrupted before`` ``nothing``) when
    nothing was done (``size`` 0)."""
    runs: list[R] = []
    current: list[R] = []
    stopped = anyio.Event()
    with interrupts() as signals:
        async with anyio.create_task_group() as tg:
            if signals is not None:
                tg.start_soon(stop_on_sigint, signals, tg.cancel_scope, stopped)
            with live or contextlib.nullcontext():
                for target in targets:
                    current.clear()
                    run = await measure(target, current)
                    runs.append(run)
                    show(run)
            tg.cancel_scope.cancel()
    if not stopped.is_set():
        return runs, None
    if current and current[0] not in runs:
        current[0].interrupted = True
        show(current[0])
        runs.append(current[0])
    done = sum(size(run) for run in runs)
    if done == 0:
        raise BenchInterrupted(f"interrupted before {nothing}")
    return runs, f"after {done} of {of}"


def write_outputs(
    json: Path | None,
    html: Path | None,
    data: Callable[[list[R], dict[str, Any]], dict[str, Any]],
    page: Callable[[list[R], dict[str, Any]], str],
    runs: list[R],
    settings: dict[str, Any],
    interrupted: str | None,
) -> None:
    """``--json`` and ``--html`` when asked for, the settings marked when Ctrl-C
    stopped the run (then ``BenchInterrupted``, once they are written)."""
    if interrupted is not None:
        settings = {**settings, "interrupted": interrupted}
    if json is not None:
        write_json(json, data(runs, settings))
    if html is not None:
        write_output(html, page(runs, settings))
    if interrupted is not None:
        raise BenchInterrupted(f"interrupted {interrupted}")


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


def console() -> Console:
    """The terminal's width on a terminal; wide enough for the tables elsewhere."""
    terminal = Console()
    return terminal if terminal.is_terminal else Console(width=120)


def say(console: Console, line: str) -> None:
    """One line, however long, taken as written."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)


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
        check_outputs(self.json, self.html)


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
                changed = config.with_overrides(
                    {"llm": {"spec": llm}, "tts": {"spec": tts}}
                ).with_overrides({"sink": NULL_SINK})
                label = " ".join(
                    [path.stem] + ([f"llm={llm}"] if llm else []) + ([f"tts={tts}"] if tts else [])
                )
                targets.append(Target(label, changed))
    return targets


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


async def run_bench(
    options: BenchOptions, prompts: Sequence[str], targets: Sequence[Target], console: Console
) -> list[TargetRun]:
    """Every target in turn (``measure_each``), its progress shown on a terminal,
    its table printed when it is done; Ctrl-C (SIGINT) cancels the running turn
    and keeps the turns finished."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("first audio p50 {task.fields[p50]}  errors {task.fields[errors]}"),
        console=console,
        disable=not console.is_terminal,  # quiet in a pipe or a log file
    )

    async def measure(target: Target, current: list[TargetRun]) -> TargetRun:
        task = progress.add_task(target.label, total=options.turns, p50="—", errors=0)
        # A running server is measured as its client; a pipeline, in process.
        measure = run_target if target.url is None else partial(run_remote, token=options.token)
        run = await measure(
            target,
            prompts,
            turns=options.turns,
            warmup=options.warmup,
            concurrency=options.concurrency,
            warm_up_prompt=WARM_UP_PROMPT,
            on_turn=partial(_advance, progress, task, current),
        )
        if run.error is not None:
            progress.update(task, visible=False)
        return run

    of = f"{options.turns * len(targets)} turns"
    show = partial(_print_run, console)
    runs, stopped = await measure_each(
        targets, measure, show, lambda run: len(run.turns), of, "any turn finished", progress
    )
    write_outputs(
        options.json, options.html, bench_json, bench_page, runs, options.settings, stopped
    )
    return runs


def _print_run(console: Console, run: TargetRun) -> None:
    if run.error is not None:
        say(console, f"{run.target.label}: not measured: {run.error}")
        return
    say(console, target_heading(run))
    console.print(target_table(run))
    failed = [turn.error for turn in run.turns if turn.error is not None]
    if failed:
        say(
            console,
            f"{run.target.label}: {len(failed)} of {len(run.turns)} turns failed, "
            f"the first: {failed[0]}",
        )


def _advance(
    progress: Progress, task: TaskID, current: list[TargetRun], run: TargetRun, turn: TurnSample
) -> None:
    current[:] = [run]
    values = [t.report.first_audio_ms for t in run.counted if t.report is not None]
    shown = [v for v in values if v is not None]
    p50 = f"{nearest_rank(shown, 0.5):.0f} ms" if shown else "—"
    progress.update(task, advance=1, p50=p50, errors=run.errors)

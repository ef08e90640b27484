"""The served-level runner of the benchmarks that measure ``voice-membrane
serve`` (``serve_load``, ``voice_serve``): the fakes, each in a process of its
own, and a pipeline file on them (``fakes_for_serve``); per level a fresh serve
process (``serving``: warmed up on every worker), its sessions spread over
client processes (``clients``' protocol), the server's CPU and resident memory
sampled meanwhile, and what the clients said collected (``run_level``). A
scenario brings its pipeline, its client module and its records."""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

import anyio

from .child import bench_child, library_env
from .clients import ClientResult, parse_result
from .fakes import Recipe, fakes_process
from .serve_process import group_cpu_s, group_pids, group_rss_mb, serve_process, warm_every_worker

R = TypeVar("R")
Warm = Callable[[str], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class Fakes:
    """The fakes running (their URLs by name, their pids), and what a ``serve`` on
    them needs: its pipeline file (in ``folder``, with the serve logs), its
    environment."""

    urls: dict[str, str]
    pids: list[int]
    pipeline: Path
    env: dict[str, str]
    folder: Path


@contextlib.contextmanager
def fakes_for_serve(
    recipe: Recipe,
    processes: Sequence[Mapping[str, Any]],
    pipeline: Callable[[dict[str, str]], str],
    env: Callable[[dict[str, str]], dict[str, str]],
) -> Iterator[Fakes]:
    """``recipe``'s fakes, a process for each of ``processes`` (its arguments),
    and the pipeline file and environment (``pipeline``, ``env``: from the
    fakes' URLs by name) a serve on them runs with."""
    with tempfile.TemporaryDirectory() as name, contextlib.ExitStack() as stack:
        started = [stack.enter_context(fakes_process(recipe, args)) for args in processes]
        urls = {key: url for fakes in started for key, url in fakes.urls().items()}
        pids, folder = [fakes.pid for fakes in started], Path(name)
        (folder / "pipeline.toml").write_text(pipeline(urls), "utf-8")
        environment = library_env({**os.environ, **env(urls)})
        yield Fakes(urls, pids, folder / "pipeline.toml", environment, folder)


@dataclass(frozen=True, slots=True)
class Server:
    url: str  # ws://…
    pid: int
    log: Path


@contextlib.contextmanager
def serving(
    fakes: Fakes,
    name: str,
    workers: int = 1,
    warm: Warm | None = None,
    folder: Path | None = None,
) -> Iterator[Server]:
    """A fresh ``serve --workers N`` on the fakes, its log ``serve-NAME.log`` (in
    ``folder``, else the fakes'), once ``warm(url)`` (one warm-up turn, run
    again until it has reached every worker) is done."""
    log = (folder or fakes.folder) / f"serve-{name}.log"
    with (
        open(log, "w+", encoding="utf-8") as out,
        serve_process(fakes.pipeline, fakes.env, out, workers) as (url, pid),
    ):
        if warm is not None:
            warm_every_worker(lambda: anyio.run(warm, url), workers, log)
        yield Server(url, pid, log)


@dataclass(frozen=True, slots=True)
class LevelRun(Generic[R]):
    """What the client processes said (None: one that died) and what the server
    (every process of its group) and the fakes spent meanwhile."""

    results: list[ClientResult[R] | None]
    seconds: float  # from the go to the last result line
    server_cpu_s: float
    fakes_cpu_s: float
    rss_base_mb: float  # the server's, before the sessions connected
    rss_peak_mb: float
    log: Path | None = None  # the serve log

    def figures(self) -> dict[str, Any]:
        """The fields a level's record (``LevelResult``, ``CallLevel``) has in
        common: the turns, the errors outside them (a client process that died
        is one), the clients' lag and CPU (together, over the longest one's run),
        the fakes' CPU and the server's memory."""
        done = [result for result in self.results if result]
        wall = max((result.wall_s for result in done), default=0.0)
        return {
            "turns": [turn for result in done for turn in result.turns],
            "errors": [
                e for r in self.results for e in (r.errors if r else ["a client process died"])
            ],
            "clients": len(self.results),
            "client_lag_ms": [lag for result in done for lag in result.lag_ms],
            "client_cpu_cores": sum(r.cpu_s for r in done) / wall if wall else 0.0,
            "fakes_cpu_cores": self.fakes_cpu_s / self.seconds,
            "server_rss_base_mb": self.rss_base_mb,
            "server_rss_peak_mb": self.rss_peak_mb,
            "seconds": self.seconds,
        }


def shares(sessions: int, per_client: int) -> list[int]:
    """``sessions`` spread over as few client processes as hold ``per_client`` each."""
    count = max(1, math.ceil(sessions / per_client))
    return [sessions // count + (i < sessions % count) for i in range(count)]


def run_clients(
    module: str,
    plan: Any,
    url: str,
    spread: Sequence[int],
    record: Callable[..., R],
    fake_pids: Sequence[int],
    server: Sequence[int] = (),
) -> LevelRun[R]:
    """One ``module`` process per share of ``spread`` (``clients``' protocol:
    ``plan`` as JSON, ``url``), told to go together once all have connected;
    their results (turns as ``record``s), ``server``'s CPU and peak memory (its
    pids, summed) and the fakes' CPU until the last result."""
    args = json.dumps(asdict(plan))
    rss_base = group_rss_mb(server)
    with contextlib.ExitStack() as stack:
        clients = [
            stack.enter_context(bench_child(module, [args, url, str(n), str(i)]))
            for i, n in enumerate(spread)
        ]
        for client in clients:
            if client.line != "connected":
                raise RuntimeError(f"a {module.rpartition('.')[2]} process said {client.line!r}")
        rss_peak = group_rss_mb(server)
        server_cpu, fakes_cpu = group_cpu_s(server), group_cpu_s(fake_pids)
        began = time.perf_counter()
        for client in clients:
            assert client.process.stdin is not None
            client.process.stdin.write("go\n")
            client.process.stdin.flush()
        lines: list[str] = []
        for client in clients:
            assert client.process.stdout is not None
            while (line := _readline_sampling(client.process.stdout)) is None:
                rss_peak = max(rss_peak, group_rss_mb(server))
            lines.append(line)
            rss_peak = max(rss_peak, group_rss_mb(server))
        return LevelRun(
            [parse_result(line, record) if line else None for line in lines],
            time.perf_counter() - began,
            group_cpu_s(server) - server_cpu,
            group_cpu_s(fake_pids) - fakes_cpu,
            rss_base,
            rss_peak,
        )


def _readline_sampling(stream: IO[str]) -> str | None:
    """A line from ``stream``, or None after 0.2 s without one (time to sample)."""
    ready, _, _ = select.select([stream], [], [], 0.2)
    if not ready:
        return None
    return stream.readline().strip()


def run_level(
    fakes: Fakes,
    name: str,
    workers: int,
    warm: Warm,
    module: str,
    plan: Any,
    sessions: int,
    per_client: int,
    record: Callable[..., R],
) -> LevelRun[R]:
    """One level on a fresh, warmed-up server: ``sessions`` of ``module``'s
    clients, ``per_client`` at most in a process."""
    with serving(fakes, name, workers, warm) as server:
        pids = group_pids(server.pid)  # with --workers N: the parent and every worker
        spread = shares(sessions, per_client)
        run = run_clients(module, plan, server.url, spread, record, fakes.pids, pids)
    return replace(run, log=server.log)


class Clock:
    """A benchmark's wall time, and the machine's 1-minute load average before and after."""

    def __init__(self) -> None:
        self.started, self.load_before = time.perf_counter(), os.getloadavg()[0]

    def stop(self) -> tuple[float, float, float]:
        """(load before, load after, seconds), as the results hold them."""
        return self.load_before, os.getloadavg()[0], time.perf_counter() - self.started

"""The serve command's process: listen, say so on stdout, drain on a signal.

SIGTERM drains (running turns finish, up to the drain timeout) and exits 0: an
orchestrator's contract. Ctrl-C (SIGINT) drains too, saying so on stderr, and
a second Ctrl-C stops at once: the running turns are cancelled, their sockets
closed (1001). A stop begun by Ctrl-C is reported as an interrupt (exit 130).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from ..infra.heap import settle_heap
from ..pipeline.config import load_pipeline
from .log import JsonLog, Log
from .server import Server
from .workers import PORT_ENV, WorkerGroup, auto_workers, die_with_parent, worker_name

READY_LINE = "listening on {url}"


async def run_server(pipelines: Sequence[str | Path], **options: Any) -> bool:
    """Serve until SIGTERM or SIGINT, then drain and return whether Ctrl-C (SIGINT)
    stopped it. Prints one line, ``listening on http://HOST:PORT``, on stdout
    once the port accepts."""
    interrupted = False
    if (name := worker_name()) is not None:  # one of serve --workers N (workers.py)
        die_with_parent()
        options.update(port=int(os.environ[PORT_ENV]), reuse_port=True)
        options["log"] = _named(options.get("log") or JsonLog(), name)
    async with Server(pipelines, **options) as server:
        settle_heap()  # the engines are loaded: keep them out of every full collection
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            print(READY_LINE.format(url=server.url), flush=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain_on_signal, signals, server)
                await server.serve_forever()
                tg.cancel_scope.cancel()
            interrupted = server.stopped_by == signal.SIGINT
    sys.stdout.flush()
    return interrupted


def workers_wanted(setting: str | int, pipelines: Sequence[str | Path]) -> int:
    """How many processes serve: 1 in a group's worker (it is one of them)."""
    if worker_name() is not None:
        return 1
    if setting == "auto":
        return auto_workers({str(path): load_pipeline(path) for path in pipelines})
    return int(setting)


def store_warning(store: str, workers: int) -> str | None:
    """What a group of ``workers`` on the ``store`` of sessions should be told."""
    if workers < 2 or store != "memory":
        return None
    return (
        f"warning: {workers} workers with the memory session store: a reconnecting "
        f"client resumes only if it reaches its own worker (1 time in {workers}); "
        "set [sessions] store to a Redis URL (docs/serve.md)"
    )


async def run_group(
    pipelines: Sequence[str | Path],
    count: int,
    command: Sequence[str],
    notice: str | None = None,
    **options: Any,
) -> int:
    """``serve --workers N`` (``count`` > 1): supervise ``count`` workers running
    ``command``; the exit code. A bad pipeline, host or token is refused here, in
    one line, before any worker starts; ``notice`` is said once they listen."""
    Server(pipelines, preload=False, **options)
    sessions = options.get("sessions")
    group = WorkerGroup(
        argv=command,
        count=count,
        host=options["host"],
        port=options["port"],
        drain_timeout_s=options["drain_timeout_s"],
        log=options["log"],
        token=options.get("token"),
        store=None if sessions is None else sessions.store,
        notice=None if notice is None else f"voice-membrane serve: {notice}",
    )
    return await group.run(READY_LINE)


async def _drain_on_signal(signals: Any, server: Server) -> None:
    """The first signal drains; a second Ctrl-C stops now (a second SIGTERM
    changes nothing: the drain timeout bounds it)."""
    async with anyio.create_task_group() as tg:
        async for signum in signals:
            if server.stopped_by is None:
                server.stopped_by = signum
                if signum == signal.SIGINT and worker_name() is None:  # a group's parent says it
                    _say(_draining_line(server.turns_running))
                tg.start_soon(server.drain)
            elif signum == signal.SIGINT:
                if worker_name() is None:
                    _say("stopping now: cancelling the running turns")
                server.stopped_by = signum
                await server.stop_now()
                tg.cancel_scope.cancel()
                return


def _draining_line(turns: int) -> str:
    if turns == 0:
        return "stopping (no turn running)"
    return f"draining {turns} turn{'s' if turns != 1 else ''} (Ctrl-C again to stop now)"


def _say(line: str) -> None:
    sys.stderr.write(f"voice-membrane serve: {line}\n")
    sys.stderr.flush()


def _named(log: Log, name: str) -> Log:
    """A worker's log lines say which worker wrote them."""

    def write(event: str, **fields: Any) -> None:
        log(event, worker=name, **fields)

    return write

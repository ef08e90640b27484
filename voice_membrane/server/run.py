"""The serve command's process: listen, say so on stdout, drain on a signal.

SIGTERM drains (running turns finish, up to the drain timeout) and exits 0: an
orchestrator's contract. Ctrl-C (SIGINT) drains too, saying so on stderr, and
a second Ctrl-C stops at once: the running turns are cancelled, their sockets
closed (1001). A stop begun by Ctrl-C is reported as an interrupt (exit 130).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from ..infra.heap import settle_heap
from .server import Server

READY_LINE = "listening on {url}"


async def run_server(pipelines: Sequence[str | Path], **options: Any) -> bool:
    """Serve until SIGTERM or SIGINT, then drain and return whether Ctrl-C (SIGINT)
    stopped it. Prints one line, ``listening on http://HOST:PORT``, on stdout
    once the port accepts."""
    interrupted = False
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


async def _drain_on_signal(signals: Any, server: Server) -> None:
    """The first signal drains; a second Ctrl-C stops now (a second SIGTERM
    changes nothing: the drain timeout bounds it)."""
    async with anyio.create_task_group() as tg:
        async for signum in signals:
            if server.stopped_by is None:
                server.stopped_by = signum
                if signum == signal.SIGINT:
                    _say(_draining_line(server.turns_running))
                tg.start_soon(server.drain)
            elif signum == signal.SIGINT:
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

"""The serve command's process: listen, say so on stdout, drain on SIGTERM."""

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


async def run_server(pipelines: Sequence[str | Path], **options: Any) -> None:
    """Serve until SIGTERM or SIGINT, then drain and return. Prints one line,
    ``listening on http://HOST:PORT``, on stdout once the port accepts."""
    async with Server(pipelines, **options) as server:
        settle_heap()  # the engines are loaded: keep them out of every full collection
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            print(READY_LINE.format(url=server.url), flush=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain_on_signal, signals, server)
                await server.serve_forever()
                tg.cancel_scope.cancel()
    sys.stdout.flush()


async def _drain_on_signal(signals: Any, server: Server) -> None:
    async for _ in signals:
        await server.drain()
        return

"""The client processes of the served benchmarks, one protocol for all (the
parent's side: ``served.run_clients``).

``python -m voice_membrane.bench.MODULE PLAN URL N SEED`` (``client_main``)
opens its ``N`` sessions, says "connected", waits for a line on stdin, runs
each (its first turn at a random moment within the plan's ramp, from
``SEED``), closes them and prints its ``ClientResult`` as one JSON line. It
also measures its own CPU and event-loop lag over the runs, so a client that
could not keep up is seen, not mistaken for the server.
"""

from __future__ import annotations

import json
import random
import resource
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import anyio
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from .remote import start_session

R = TypeVar("R")
P = TypeVar("P")
Go = Callable[[], Awaitable[None]]
LAG_TICK_S = 0.01


@dataclass
class ClientResult(Generic[R]):
    turns: list[R] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # not in a turn (connect, close)
    lag_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    # A voice caller's frames: each send after its schedule (the result line: p50, p99, max).
    send_late_ms: list[float] = field(default_factory=list)


class Session(Protocol):
    def connected(self) -> AbstractAsyncContextManager[None]:
        """The session, open (closed on leaving)."""

    async def run(self, delay: float) -> None:
        """Its turns, the first ``delay`` s from now."""


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def describe(error: BaseException) -> str:
    """An error as its kind, for the report's count of errors by kind."""
    if isinstance(error, ConnectionClosed):
        received = error.rcvd
        return f"closed {received.code if received else 'without a close frame'}"
    return type(error).__name__


async def _lag(samples: list[float]) -> None:
    while True:
        start = time.perf_counter()
        await anyio.sleep(LAG_TICK_S)
        samples.append((time.perf_counter() - start - LAG_TICK_S) * 1000)


async def run_sessions(
    sessions: Sequence[Session],
    ramp_s: float,
    seed: int,
    result: ClientResult[Any],
    go: Go,
    lag: bool = True,
    hold: bool = False,
) -> None:
    """Open every session, wait for ``go``, run them, close them; the process's
    CPU and wall time (and with ``lag`` its event-loop lag) over the runs into
    ``result``. Each session lives in one task from its opening to its close (a
    phone call's client holds a task group of its own); with ``hold`` it stays
    open until every session's turns are done (the load's N sessions at once to
    the end; the closes then outside the CPU and wall time)."""
    rng = random.Random(seed)
    delays = [rng.uniform(0, ramp_s) for _ in sessions]
    waiting, running = [len(sessions)], [len(sessions)]
    all_open, started, all_ran = anyio.Event(), anyio.Event(), anyio.Event()
    began = cpu = 0.0

    def ran() -> None:  # a session's turns are over (or it never opened)
        running[0] -= 1
        if running[0] <= 0 and not all_ran.is_set():
            result.wall_s, result.cpu_s = time.perf_counter() - began, own_cpu_s() - cpu
            all_ran.set()

    def opened() -> None:
        waiting[0] -= 1
        if waiting[0] <= 0:
            all_open.set()

    async def one(session: Session, delay: float) -> None:
        connected = False
        try:
            async with session.connected():
                connected = True
                opened()
                await started.wait()
                await session.run(delay)
                ran()
                if hold:
                    await all_ran.wait()
        except Exception as error:  # counted: this session runs no turn
            if connected:
                raise
            # a refused phone call says its HTTP status; otherwise the error's kind
            refused = type(error).__name__ == "CallRefused"
            result.errors.append(f"connect: {error if refused else describe(error)}")
            opened()
            await started.wait()
            ran()

    if not sessions:
        all_open.set()
    async with anyio.create_task_group() as group:
        async with anyio.create_task_group() as runs:
            for session, delay in zip(sessions, delays, strict=True):
                runs.start_soon(one, session, delay)
            await all_open.wait()
            await go()
            cpu, began = own_cpu_s(), time.perf_counter()
            if lag:  # (not for a process in the server's place: its wake-ups would count)
                group.start_soon(_lag, result.lag_ms)
            started.set()
        if not hold or not all_ran.is_set():  # (without hold: the closes counted too)
            result.wall_s, result.cpu_s = time.perf_counter() - began, own_cpu_s() - cpu
        group.cancel_scope.cancel()


async def go_when_told() -> None:
    """A client process's start signal: say "connected", then wait for the
    parent's line on stdin."""
    print("connected", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)


def client_main(
    plan_type: Callable[..., P],
    run: Callable[[str, P, int, int, Go], Awaitable[ClientResult[Any]]],
) -> None:
    """A client process: ``run(URL, PLAN, N, SEED, go)`` from its arguments; its
    result line printed."""
    plan, url, count, seed = sys.argv[1:5]
    done = anyio.run(run, url, plan_type(**json.loads(plan)), int(count), int(seed), go_when_told)
    print(json.dumps(asdict(done)), flush=True)


def parse_result(line: str, record: Callable[..., R]) -> ClientResult[R]:
    """A client process's result line, its turns as ``record``s."""
    data = json.loads(line)
    turns = [record(**turn) for turn in data.pop("turns")]
    return ClientResult(turns, **data)


async def open_session(url: str, **start: Any) -> tuple[ClientConnection, dict[str, Any]]:
    """A protocol-1 session on ``url``'s ``/v1/session`` (``start``: what
    ``session.start`` asks), and its ``session.started``."""
    ws = await connect(url + "/v1/session", compression=None, open_timeout=60)
    with anyio.fail_after(60):
        return ws, await start_session(ws, **start)


async def end_session(ws: ClientConnection, errors: list[str]) -> None:
    """``session.end``, then the server's close (what is left of the last turn
    read and dropped); anything but a normal close into ``errors``."""
    try:
        await ws.send(json.dumps({"type": "session.end"}))
        with anyio.fail_after(10):
            async for _ in ws:
                pass
    except ConnectionClosed:
        pass
    except TimeoutError:
        errors.append("no close after session.end")
    if ws.close_code not in (1000, None):
        errors.append(f"closed {ws.close_code}")
    await ws.close()

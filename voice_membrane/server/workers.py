"""``serve --workers N``: N worker processes on one port, each its own event loop.

Each worker is the same ``serve`` command run again (one process, as
``--workers 1``), binding the port with ``SO_REUSEPORT``: the kernel spreads
new connections over the workers' listening sockets, no byte of a session goes
through a parent, and a worker is exactly the server of one process. The parent
only supervises:

- it binds the port first (``--port 0``: the kernel picks it once) and holds it,
  not listening, so the workers join that port and no other program takes it;
- it gives the workers a private metrics directory (``group_metrics.py``), the
  token and the session store's URL (its password) in their environment (never
  on a command line: ``ps`` shows it to every user), and their own session,
  so that Ctrl-C in a terminal reaches the parent only and is passed on once;
- it prints ``listening on URL`` once every worker accepts, then the workers'
  count and pids;
- a signal is passed to every worker (SIGTERM: each drains and exits 0; a
  second Ctrl-C stops them now); the parent exits when they all have;
- a worker that dies otherwise is started again (its sessions are lost; the
  others' are untouched), unless workers die more than ``MAX_RESTARTS`` times a
  minute: then the group stops (exit 1) rather than crash-loop.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from ..pipeline.config import PipelineConfig
from .group_metrics import MULTIPROC_ENV, write_pids
from .listening_setup import listens
from .log import Log
from .serve_config import STORE_VARIABLE

WORKER_ENV = "VOICE_MEMBRANE_WORKER"  # set in a worker: its name ("w1", …)
PORT_ENV = "VOICE_MEMBRANE_WORKER_PORT"  # the group's port, bound by the parent
PARENT_ENV = "VOICE_MEMBRANE_WORKER_PARENT"  # the parent's pid
READY_TIMEOUT_S = 300.0  # a worker loads its pipelines' models before it accepts
MAX_RESTARTS, RESTART_WINDOW_S = 5, 60.0
STOP_GRACE_S = 20.0  # after the drain timeout: the workers' closing handshakes, then kill
# Engines that compute on this machine: their models load in every process, and
# they already spread over the cores (llama.cpp's and onnxruntime's threads).
LOCAL_LLM, LOCAL_TTS, LOCAL_STT = {"local"}, {"piper", "espeak"}, {"pocketsphinx", "whisper"}


class GroupError(Exception):
    """The group could not start, or its workers kept dying: one line. ``quiet``:
    a worker has already said why in its own line (a user's error: exit code 1)."""

    def __init__(self, message: str, *, quiet: bool = False) -> None:
        super().__init__(message)
        self.quiet = quiet


def worker_name() -> str | None:
    """This process's name in a group (``w1``…), or None when it is not a worker."""
    return os.environ.get(WORKER_ENV) or None


def computes_here(config: PipelineConfig) -> bool:
    """The pipeline runs an engine on this machine's CPU (the embedded model, a
    local voice or recognizer)."""
    kind = config.llm.spec.partition(":")[0]
    voice = config.tts.spec.partition(":")[0]
    stt = config.stt.spec.partition(":")[0] if listens(config) else None
    return kind in LOCAL_LLM or voice in LOCAL_TTS or stt in LOCAL_STT


def auto_workers(pipelines: dict[str, PipelineConfig]) -> int:
    """``--workers auto``: one per core this process may run on, or 1 when a
    pipeline computes here (N copies of its models would share the same cores)."""
    if any(computes_here(config) for config in pipelines.values()):
        return 1
    return max(1, len(os.sched_getaffinity(0)))


def reserve_port(host: str, port: int) -> socket.socket:
    """The group's port, bound (``SO_REUSEPORT``) and not listening: the workers
    bind it too; while the parent holds it no one else can take it."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise GroupError(f"cannot listen on {host}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise GroupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def die_with_parent() -> None:
    """In a worker: SIGTERM (a drain) when the parent dies, even by SIGKILL (Linux)."""
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    if str(os.getppid()) != os.environ.get(PARENT_ENV, str(os.getppid())):
        os.kill(os.getpid(), signal.SIGTERM)  # the parent died before the line above


@dataclass
class _Worker:
    name: str
    process: Process | None = None
    pid: int = 0


@dataclass
class WorkerGroup:
    """``argv``: the worker's command (``serve`` with the user's options, but not
    ``--token`` or ``--session-store``); ``token`` and ``store`` (the session
    store's URL): passed in the workers' environment."""

    argv: Sequence[str]
    count: int
    host: str
    port: int
    drain_timeout_s: float
    log: Log
    token: str | None = None
    store: str | None = None
    notice: str | None = None  # said on stderr once the group listens
    stopped_by: int | None = None
    _workers: list[_Worker] = field(default_factory=list)
    _deaths: list[float] = field(default_factory=list)
    _failed: GroupError | None = None
    _codes: list[int] = field(default_factory=list)  # of the workers that stopped on request
    _watching: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def run(self, ready_line: str) -> int:
        """Serve until a signal has stopped every worker; the exit code (0 after
        SIGTERM, 130 after Ctrl-C, 1 when the group failed)."""
        held = reserve_port(self.host, self.port)
        self.port = held.getsockname()[1]
        self._dir = Path(tempfile.mkdtemp(prefix="voice-membrane-metrics-"))
        self._workers = [_Worker(f"w{i + 1}") for i in range(self.count)]
        try:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._on_signals, signals)
                    await self._start_all()
                    if self._failed is None and self.stopped_by is None:
                        self._write_pids()
                        pids = [w.pid for w in self._workers]
                        print(ready_line.format(url=self.url), flush=True)
                        print(f"{self.count} workers: pids {', '.join(map(str, pids))}", flush=True)
                        if self.notice is not None:
                            print(self.notice, file=sys.stderr, flush=True)
                        self.log(
                            "workers",
                            count=self.count,
                            pids=pids,
                            url=self.url,
                            metrics_dir=str(self._dir),
                        )
                    with self._watching:
                        async with anyio.create_task_group() as watching:
                            for worker in self._workers:
                                watching.start_soon(self._watch, worker)
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._kill_all()
            held.close()
            shutil.rmtree(self._dir, ignore_errors=True)
        if self._failed is not None:
            raise self._failed
        if self.stopped_by == signal.SIGINT:
            return 130
        return 0 if all(code == 0 for code in self._codes) else 1

    async def _start_all(self) -> None:
        """The first worker alone (a pipeline that cannot load says so once), then
        the others side by side."""

        async def start(worker: _Worker) -> None:
            try:
                await self._start(worker)
            except GroupError as exc:
                if self.stopped_by is None:  # not a worker stopped by the signal
                    await self._fail(exc)

        await start(self._workers[0])
        if self._failed is None and self.stopped_by is None:
            async with anyio.create_task_group() as starting:
                for worker in self._workers[1:]:
                    starting.start_soon(start, worker)

    async def _start(self, worker: _Worker) -> None:
        env = {k: v for k, v in os.environ.items() if k.lower() != MULTIPROC_ENV.lower()}
        env.update(
            {WORKER_ENV: worker.name, PORT_ENV: str(self.port), MULTIPROC_ENV: str(self._dir)}
        )
        env[PARENT_ENV] = str(os.getpid())
        if self.token is not None:
            env["VOICE_MEMBRANE_TOKEN"] = self.token
        if self.store is not None:
            env[STORE_VARIABLE] = self.store
        process = await anyio.open_process(
            list(self.argv), stdin=None, stdout=-1, stderr=None, env=env, start_new_session=True
        )
        worker.process, worker.pid = process, process.pid
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        line = b""
        with anyio.move_on_after(READY_TIMEOUT_S):
            with contextlib.suppress(
                anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound
            ):
                line = await lines.receive_until(b"\n", 4096)
        if not line.startswith(b"listening on "):
            # Its end first: killing one that is exiting would reap it behind the
            # child watcher's back (Popen.send_signal polls), losing its exit code.
            with anyio.move_on_after(STOP_GRACE_S):
                await process.wait()
            await self._kill(worker)
            code = process.returncode
            said = f"exited with code {code}" if code is not None else "did not start in time"
            raise GroupError(f"worker {worker.name} {said}", quiet=code == 1)

    async def _watch(self, worker: _Worker) -> None:
        """Wait for the worker's end; start it again if nothing asked it to stop."""
        while worker.process is not None:
            process = worker.process
            async with anyio.create_task_group() as tg:
                tg.start_soon(_discard, process)  # a full pipe would block the worker
                code = await process.wait()
                tg.cancel_scope.cancel()  # its own children may hold the pipe open
            if self.stopped_by is not None or self._failed is not None:
                self._codes.append(code)
                return
            self._forget(worker)
            self.log("worker_exit", worker=worker.name, pid=worker.pid, code=code)
            now = time.monotonic()
            self._deaths = [t for t in self._deaths if now - t < RESTART_WINDOW_S] + [now]
            if len(self._deaths) > MAX_RESTARTS:
                reason = f"workers died {len(self._deaths)} times in a minute: stopping"
                await self._fail(GroupError(reason))
                return
            try:
                await self._start(worker)
            except GroupError as exc:
                await self._fail(exc)
                return
            self._write_pids()
            self.log("worker_restart", worker=worker.name, pid=worker.pid)

    def _forget(self, worker: _Worker) -> None:
        """A dead worker's live gauges (sessions, turns) leave the sum at once."""
        from prometheus_client.multiprocess import mark_process_dead

        mark_process_dead(worker.pid, str(self._dir))  # type: ignore[no-untyped-call]

    async def _fail(self, error: GroupError) -> None:
        if self._failed is None:
            self._failed = error
        self._signal_all(signal.SIGTERM)  # the others drain: their turns finish
        self._stop_waiting_later()

    def _stop_waiting_later(self) -> None:
        """Stopping workers get the drain timeout and a grace; then they are killed."""
        if self._watching.deadline == float("inf"):
            self._watching.deadline = anyio.current_time() + self.drain_timeout_s + STOP_GRACE_S

    async def _on_signals(self, signals: Any) -> None:
        async for signum in signals:
            if self.stopped_by is None:
                self.stopped_by = signum
                if signum == signal.SIGINT:
                    _say(f"draining {self.count} workers (Ctrl-C again to stop now)")
                self._signal_all(signum)
                self._stop_waiting_later()
            elif signum == signal.SIGINT:
                _say("stopping now: cancelling the running turns")
                self.stopped_by = signum
                self._signal_all(signum)

    def _signal_all(self, signum: int) -> None:
        for worker in self._workers:
            if worker.process is not None and worker.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signal.Signals(signum))

    async def _kill_all(self) -> None:
        """Kill any worker left (never leave one behind)."""
        for worker in self._workers:
            await self._kill(worker)

    async def _kill(self, worker: _Worker) -> None:
        process = worker.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    def _write_pids(self) -> None:
        processes = [("parent", os.getpid())] + [(w.name, w.pid) for w in self._workers]
        write_pids(self._dir, processes)


async def _discard(process: Process) -> None:
    if process.stdout is not None:
        async for _ in process.stdout:
            pass


def _say(line: str) -> None:
    sys.stderr.write(f"voice-membrane serve: {line}\n")
    sys.stderr.flush()

"""The client side of the ``serve`` load measurement (``serve_load``): a process
holding some of the sessions, each playing its turns' audio as a player would.

``python -m voice_membrane.bench.load_client PLAN URL SESSIONS SEED`` opens
``SESSIONS`` sessions (``session.start``), says "connected", waits for a line on
stdin, then runs each session's turns (``ClientPlan``) starting at a random
moment within the ramp (``SEED``), and prints its ``ClientResult`` as one JSON
line. Per turn, client side:

- *first audio*: the first binary frame of the turn after ``user.message`` was
  sent;
- *underruns*: playback starts at the first frame's arrival and frames play
  back to back (their duration from their size); a frame arriving after its
  scheduled play time is an underrun (the audio queued ran out), and playback
  resumes at its arrival;
- *errors*: ``error`` events, a ``turn.end`` with an error, a close other than
  the session's own ``session.end``, lost frames (a gap in sequence numbers),
  a turn with no audio or that did not end within the plan's turn timeout.

The process also measures its own event-loop lag (a ``LAG_TICK_S`` ticker's
overshoot) and CPU, so a client that could not keep up is seen, not mistaken
for the server.
"""

from __future__ import annotations

import json
import random
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from ..server.protocol import unpack_frame
from .remote import start_session

LAG_TICK_S = 0.01
SERVER_STAMPS = ("first_token", "first_chunk", "tts_request", "tts_first_byte", "first_audio")


@dataclass(frozen=True, slots=True)
class ClientPlan:
    """What every session does: ``turns`` turns asking ``prompt`` for pcm16 at
    ``sample_rate`` in ``frame_ms`` frames, the first at a random moment within
    ``ramp_s``, each sent ``think_s`` after the previous reply finished playing."""

    prompt: str
    sample_rate: int
    turns: int
    ramp_s: float
    think_s: float
    turn_timeout_s: float  # a turn that takes longer has failed
    frame_ms: int = 20  # the reply's frames, as session.start asks (protocol 1.2)


@dataclass
class TurnRecord:
    number: int = 0  # the session's turn: 1, 2, …
    first_audio_ms: float | None = None
    underruns: int = 0
    late_ms: float = 0.0  # the longest gap: a frame's arrival after its play time
    frames: int = 0
    audio_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    server: dict[str, float | None] = field(default_factory=dict)  # from the metrics event


@dataclass
class ClientResult:
    turns: list[TurnRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # not in a turn (connect, close)
    lag_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0


def _server_figures(report: dict[str, Any]) -> dict[str, float | None]:
    stamps = report.get("stamps_ms") or {}
    return {name: stamps.get(name) for name in SERVER_STAMPS}


class LoadSession:
    """One session of the load, recording into ``result``."""

    def __init__(self, url: str, plan: ClientPlan, result: ClientResult) -> None:
        self.url = url
        self.plan = plan
        self.result = result
        self.ws: ClientConnection | None = None
        self.last_seq: int | None = None
        self.play_end = 0.0  # when the audio received so far has finished playing

    async def open(self) -> ClientConnection:
        ws = await connect(self.url + "/v1/session", compression=None, open_timeout=60)
        self.ws = ws
        plan = self.plan
        audio = {"encoding": "pcm16", "sample_rate": plan.sample_rate, "frame_ms": plan.frame_ms}
        with anyio.fail_after(60):
            await start_session(ws, audio=audio)
        return ws

    async def run(self, delay: float) -> None:
        await run_turns(self.plan, self.result, self._turn, delay)

    async def _turn(self, number: int, record: TurnRecord) -> float:
        ws = self.ws
        assert ws is not None
        await ws.send(json.dumps({"type": "user.message", "text": self.plan.prompt}))
        sent = time.perf_counter()
        first: float | None = None
        while True:
            message = await ws.recv()
            now = time.perf_counter()
            if isinstance(message, bytes):
                turn, seq, audio = unpack_frame(message)
                if self.last_seq is not None and seq != self.last_seq + 1:
                    record.errors.append(f"lost {seq - self.last_seq - 1} frame(s)")
                self.last_seq = seq
                if turn != number:
                    continue  # an earlier turn's frame: dropped, as a player does
                seconds = len(audio) / 2 / self.plan.sample_rate
                record.frames += 1
                record.audio_s += seconds
                if first is None:
                    first = now
                    record.first_audio_ms = (now - sent) * 1000
                    self.play_end = now
                elif now > self.play_end:
                    record.underruns += 1
                    record.late_ms = max(record.late_ms, (now - self.play_end) * 1000)
                    self.play_end = now
                self.play_end += seconds
                continue
            event = json.loads(message)
            kind = event.get("type")
            if kind == "error":
                record.errors.append(f"error {event.get('code')}")
            elif kind == "metrics" and event.get("turn") == number:
                record.server = _server_figures(event.get("report") or {})
            elif kind == "turn.end" and event.get("turn") == number:
                if event.get("error"):
                    record.errors.append(f"turn.end error: {event['error']}")
                if first is None:
                    record.errors.append("no audio")
                return self.play_end

    async def close(self) -> None:
        if self.ws is None:
            return
        try:
            await self.ws.send(json.dumps({"type": "session.end"}))
            with anyio.fail_after(10):
                async for _ in self.ws:
                    pass  # a metrics event of the last turn, perhaps
        except ConnectionClosed:
            pass
        except TimeoutError:
            self.result.errors.append("no close after session.end")
        code = self.ws.close_code
        if code not in (1000, None):
            self.result.errors.append(f"closed {code}")
        await self.ws.close()


async def run_turns(
    plan: ClientPlan,
    result: ClientResult,
    turn: Callable[[int, TurnRecord], Awaitable[float]],
    delay: float,
) -> None:
    """A session's turns, the first ``delay`` s after the start: each recorded in
    ``result``, within the plan's turn timeout, the next sent the plan's think
    time after the audio would have played (``turn`` returns when, on the
    ``perf_counter`` clock). A timeout or an error ends the session's turns."""
    await anyio.sleep(delay)
    for number in range(1, plan.turns + 1):
        record = TurnRecord(number)
        result.turns.append(record)
        try:
            with anyio.fail_after(plan.turn_timeout_s):
                play_end = await turn(number, record)
        except TimeoutError:
            record.errors.append("timeout")
            return
        except Exception as error:  # a close, mostly: this session is over
            record.errors.append(describe(error))
            return
        await anyio.sleep(max(0.0, play_end - time.perf_counter()) + plan.think_s)


async def go_when_told() -> None:
    """A client process's start signal: say "connected", then wait for the
    parent's line on stdin (``serve_process.run_clients``)."""
    print("connected", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)


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


async def run_client(
    url: str, plan: ClientPlan, sessions: int, seed: int, go: Callable[[], Awaitable[None]]
) -> ClientResult:
    """Open ``sessions`` sessions, wait for ``go``, run their turns, close them."""
    result = ClientResult()
    opened: list[LoadSession] = []
    async with anyio.create_task_group() as group:

        async def open_one() -> None:
            session = LoadSession(url, plan, result)
            try:
                await session.open()
            except Exception as error:  # counted: the session runs no turn
                result.errors.append(f"connect: {describe(error)}")
                return
            opened.append(session)

        for _ in range(sessions):
            group.start_soon(open_one)
    await go()
    rng = random.Random(seed)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        group.start_soon(_lag, result.lag_ms)
        async with anyio.create_task_group() as turns_group:
            for session in opened:
                turns_group.start_soon(session.run, rng.uniform(0, plan.ramp_s))
        result.wall_s = time.perf_counter() - began
        group.cancel_scope.cancel()
    after = resource.getrusage(resource.RUSAGE_SELF)
    result.cpu_s = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    async with anyio.create_task_group() as group:
        for session in opened:
            group.start_soon(session.close)
    return result


def read_result(line: str) -> ClientResult:
    """A client process's result line, as its ``ClientResult``."""
    data = json.loads(line)
    turns = [TurnRecord(**turn) for turn in data.pop("turns")]
    return ClientResult(turns=turns, **data)


async def warm_up(url: str, plan: ClientPlan) -> None:
    """One turn, interrupted at its first audio: the server's lazy imports and
    connection pools, and the fake's speech cache, are then warm."""
    session = LoadSession(url, plan, ClientResult())
    ws = await session.open()
    await ws.send(json.dumps({"type": "user.message", "text": plan.prompt}))
    with anyio.fail_after(plan.turn_timeout_s):
        while not isinstance(await ws.recv(), bytes):
            pass
        await ws.send(json.dumps({"type": "interrupt"}))
        while True:
            message = await ws.recv()
            if isinstance(message, str) and json.loads(message).get("type") == "turn.end":
                break
    await session.close()


def main(plan: str, url: str, sessions: str, seed: str) -> None:
    result = anyio.run(
        run_client, url, ClientPlan(**json.loads(plan)), int(sessions), int(seed), go_when_told
    )
    print(json.dumps(asdict(result)), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])

"""The client process of the ``serve`` load measurement (``serve_load``):
sessions each playing their turns' audio as a player would (the process
protocol: ``clients``).

Per turn, client side (``TurnRecord``):

- *first audio*: the first binary frame of the turn after ``user.message`` was
  sent;
- *underruns*: playback starts at the first frame's arrival and frames play
  back to back (their duration from their size); a frame arriving after its
  scheduled play time is an underrun (the audio queued ran out), and playback
  resumes at its arrival;
- *errors*: ``error`` events, a ``turn.end`` with an error, a close other than
  the session's own ``session.end``, lost frames (a gap in sequence numbers),
  a turn with no audio or that did not end within the plan's turn timeout.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from websockets.asyncio.client import ClientConnection

from ..server.protocol import unpack_frame
from .clients import (
    ClientResult,
    Go,
    client_main,
    describe,
    end_session,
    open_session,
    parse_result,
    run_sessions,
)

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


class LoadSession:
    """One session of the load, recording into ``result``."""

    def __init__(self, url: str, plan: ClientPlan, result: ClientResult[TurnRecord]) -> None:
        self.url, self.plan, self.result = url, plan, result
        self.ws: ClientConnection | None = None
        self.last_seq: int | None = None
        self.play_end = 0.0  # when the audio received so far has finished playing

    async def open(self) -> ClientConnection:
        plan = self.plan
        audio = {"encoding": "pcm16", "sample_rate": plan.sample_rate, "frame_ms": plan.frame_ms}
        self.ws, _ = await open_session(self.url, audio=audio)
        return self.ws

    @contextlib.asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        ws = await self.open()
        try:
            yield
        finally:
            await end_session(ws, self.result.errors)

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
                stamps = (event.get("report") or {}).get("stamps_ms") or {}
                record.server = {name: stamps.get(name) for name in SERVER_STAMPS}
            elif kind == "turn.end" and event.get("turn") == number:
                if event.get("error"):
                    record.errors.append(f"turn.end error: {event['error']}")
                if first is None:
                    record.errors.append("no audio")
                return self.play_end


async def run_turns(
    plan: ClientPlan,
    result: ClientResult[TurnRecord],
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


async def run_client(
    url: str, plan: ClientPlan, sessions: int, seed: int, go: Go
) -> ClientResult[TurnRecord]:
    result: ClientResult[TurnRecord] = ClientResult()
    load = [LoadSession(url, plan, result) for _ in range(sessions)]
    await run_sessions(load, plan.ramp_s, seed, result, go, hold=True)
    return result


def read_result(line: str) -> ClientResult[TurnRecord]:
    return parse_result(line, TurnRecord)


async def warm_up(url: str, plan: ClientPlan) -> None:
    """One turn, interrupted at its first audio: the server's lazy imports and
    connection pools, and the fake's speech cache, are then warm."""
    session = LoadSession(url, plan, ClientResult())
    async with session.connected():
        ws = session.ws
        assert ws is not None
        await ws.send(json.dumps({"type": "user.message", "text": plan.prompt}))
        with anyio.fail_after(plan.turn_timeout_s):
            while not isinstance(await ws.recv(), bytes):
                pass
            await ws.send(json.dumps({"type": "interrupt"}))
            while True:
                message = await ws.recv()
                if isinstance(message, str) and json.loads(message).get("type") == "turn.end":
                    break


if __name__ == "__main__":
    client_main(ClientPlan, run_client)

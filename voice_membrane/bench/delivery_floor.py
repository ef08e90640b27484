"""The other half of a served session's floor: its audio paced out to a
listening client at real time, with none of our code on the path but the
pacing's arithmetic (``pacing.BatchPacer``, the socket sink's own).

A ``websockets`` server (compression off, as ``serve``) sends each of N
sessions the load plan's turns as pcm16 frames with the protocol's 8-byte
header, paced as the socket sink paces them, to N clients in a child process
that read them. ``python -m voice_membrane.bench.delivery_floor PLAN SESSIONS
AUDIO_S SEED`` prints this process's CPU over the sessions and the seconds of
audio sent (``AUDIO_S`` a turn).
"""

from __future__ import annotations

import json
import random
import struct
import sys
import time

import anyio
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

from ..server.pacing import BatchPacer
from .clients import ClientResult, own_cpu_s
from .load_client import ClientPlan, TurnRecord, run_turns

HEADER = struct.Struct("<II")  # turn, sequence: as the session protocol's frames
CONNECT_TIMEOUT_S = 60.0


class DeliveryServer:
    def __init__(self, plan: ClientPlan, sessions: int, audio_s: float, seed: int) -> None:
        self.plan, self.sessions, self.audio_s = plan, sessions, audio_s
        self.rng = random.Random(seed)
        self.connected = 0
        self.all_connected = anyio.Event()
        self.result: ClientResult[TurnRecord] = ClientResult()
        samples = plan.sample_rate * plan.frame_ms // 1000
        self.frame_s = samples / plan.sample_rate
        self.silence = bytes(2 * samples)
        self.done = 0
        self.all_done = anyio.Event()

    async def handler(self, ws: ServerConnection) -> None:
        self.connected += 1
        if self.connected == self.sessions:
            self.all_connected.set()
        await self.all_connected.wait()
        sequence = 0
        pacer = BatchPacer(self.frame_s)

        async def turn(number: int, record: TurnRecord) -> float:
            """One turn's audio, paced; returns when it ends playing."""
            nonlocal sequence
            ends_ns = time.perf_counter_ns()  # the client holds nothing
            for _ in range(round(self.audio_s / self.frame_s)):
                now_ns = time.perf_counter_ns()
                ends_ns = max(ends_ns, now_ns)
                if wait_s := pacer.wait_s(ends_ns, now_ns):
                    await anyio.sleep(wait_s)
                await ws.send(HEADER.pack(number, sequence) + self.silence)
                sequence += 1
                ends_ns += round(self.frame_s * 1e9)
                record.frames += 1
                record.audio_s += self.frame_s
            return ends_ns / 1e9

        try:
            await run_turns(self.plan, self.result, turn, self.rng.uniform(0, self.plan.ramp_s))
        finally:
            await ws.close()
            self.done += 1
            if self.done == self.sessions:
                self.all_done.set()


async def deliver(plan: ClientPlan, sessions: int, audio_s: float, seed: int) -> dict[str, float]:
    server = DeliveryServer(plan, sessions, audio_s, seed)
    async with serve(server.handler, "127.0.0.1", 0, compression=None) as listening:
        port = listening.sockets[0].getsockname()[1]
        command = [sys.executable, "-m", __spec__.name, "read", f"ws://127.0.0.1:{port}"]
        async with await anyio.open_process([*command, str(sessions)]) as readers:
            with anyio.fail_after(CONNECT_TIMEOUT_S):  # (a reader that died: an error, no hang)
                await server.all_connected.wait()
            cpu_s = own_cpu_s()
            await server.all_done.wait()
            cpu_s = own_cpu_s() - cpu_s
            await readers.wait()
    audio = sum(turn.audio_s for turn in server.result.turns)
    errors = len(server.result.errors) + sum(len(turn.errors) for turn in server.result.turns)
    return {"cpu_s": cpu_s, "audio_s": audio, "errors": errors}


async def read(url: str, sessions: int) -> None:
    """``sessions`` clients reading everything until the server closes."""

    async def one() -> None:
        async with connect(url, compression=None, max_size=None) as ws:
            async for _ in ws:
                pass

    async with anyio.create_task_group() as tg:
        for _ in range(sessions):
            tg.start_soon(one)


def main(args: list[str]) -> None:
    if args[0] == "read":
        anyio.run(read, args[1], int(args[2]))
        return
    plan = ClientPlan(**json.loads(args[0]))
    print(json.dumps(anyio.run(deliver, plan, int(args[1]), float(args[2]), int(args[3]))))


if __name__ == "__main__":
    main(sys.argv[1:])

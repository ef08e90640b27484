"""The WebRTC transport beside the WebSocket one: per session, the bandwidth,
voice to voice and the server's CPU, at 1 and at 50 sessions at once.

The voice serve benchmark's setup (``voice_serve.voice_serve_setup``):
cloud fakes of fixed service times (STT, LLM, TTS, each in a process of its
own) and one ``voice-membrane serve`` process; the callers here, in this
process, say the recorded question in real time (16 kHz, 20 ms frames; over
WebRTC as the microphone track's Opus), the first at a random moment within
the ramp, then again after each answer. Measured:

- *voice to voice*: from the question's last voiced sample leaving the caller
  to the first audio of the answer arriving (over WebRTC: the first received
  frame with sound in it, after the jitter buffer and the Opus decoder);
- *bandwidth*: bytes both ways per session-second — over WebRTC the DTLS
  transport's (SRTP and SCTP, aiortc's stats), over the WebSocket the
  messages with their framing; neither counts IP, UDP or TCP headers;
- *server CPU*: the serve process's user + system seconds over the run, per
  session-second.

The callers run in this process: an aiortc caller costs about what the
server's peer does (Opus both ways, SRTP, in Python), so on a 2-core machine
this process cannot drive 50 WebRTC callers (their turns time out in the
callers, not the server: docs/webrtc.md). A serve process's cost at 50 is then
read from its per-session cost at the sizes that could be driven.

``python -m benchmarks.webrtc [SESSIONS…] [websocket|webrtc] [--runs N]
[--turns N]`` prints one JSON line per run (docs/webrtc.md has the figures).
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from websockets.asyncio.client import connect

from benchmarks.voice_serve import voice_serve_setup
from voice_membrane.bench.serve_process import cpu_s
from voice_membrane.bench.served import serving
from voice_membrane.bench.voice_caller import read_question
from voice_membrane.bench.voice_serve import voice_fakes, voiced_span
from voice_membrane.testing.webrtc_client import WebRtcClient

RATE = 16000
FRAME = RATE // 50
SOUND_RMS = 200.0  # a received frame with more than this is the answer's audio


@dataclass
class Caller:
    v2v_ms: list[float] = field(default_factory=list)
    bytes: int = 0
    seconds: float = 0.0
    failed: int = 0


def _rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) if len(samples) else 0.0


def _ws_bytes(size: int, masked: bool) -> int:
    header = 2 if size < 126 else 4 if size < 65536 else 10
    return size + header + (4 if masked else 0)


async def _websocket_caller(
    url: str, question: np.ndarray, end: int, turns: int, delay: float
) -> Caller:
    caller = Caller()
    started = time.monotonic()
    async with connect(url.replace("http", "ws", 1) + "/v1/session", compression=None) as ws:
        start = {
            "type": "session.start",
            "audio": {"encoding": "pcm16", "sample_rate": 24000, "frame_ms": 60},
            "input_audio": {"encoding": "pcm16", "sample_rate": RATE, "frame_ms": 20},
        }
        await ws.send(json.dumps(start))
        caller.bytes += _ws_bytes(len(json.dumps(start)), True)
        said_at: list[float] = []
        heard = anyio.Event()
        ended = anyio.Event()

        async def listen() -> None:
            async for data in ws:
                caller.bytes += _ws_bytes(len(data), False)
                if isinstance(data, bytes):
                    if said_at and not heard.is_set():
                        caller.v2v_ms.append((time.monotonic() - said_at[-1]) * 1000)
                        heard.set()
                elif '"turn.end"' in data:
                    ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(listen)
            mic = _Mic(question, end)
            tg.start_soon(_send_mic, ws, mic, caller)
            await anyio.sleep(delay)
            for _ in range(turns):
                heard, ended = anyio.Event(), anyio.Event()
                said_at.append(mic.say())
                with anyio.move_on_after(30) as scope:
                    await ended.wait()
                caller.failed += scope.cancelled_caught or not heard.is_set()
                await anyio.sleep(0.5)
            tg.cancel_scope.cancel()
    caller.seconds = time.monotonic() - started
    return caller


class _Mic:
    """The question's samples, then silence; ``say`` queues it and returns when
    its last voiced sample will have left (frames go at real time)."""

    def __init__(self, question: np.ndarray, end: int) -> None:
        self.question, self.end = question, end
        self.pending = np.zeros(0, dtype=np.int16)

    def say(self) -> float:
        queued = len(self.pending)
        self.pending = np.concatenate([self.pending, self.question])
        return time.monotonic() + (queued + self.end) / RATE

    def frame(self) -> np.ndarray:
        out = np.zeros(FRAME, dtype=np.int16)
        part = self.pending[:FRAME]
        out[: len(part)] = part
        self.pending = self.pending[len(part) :]
        return out


async def _send_mic(ws: Any, mic: _Mic, caller: Caller) -> None:
    t0, n = time.monotonic(), 0
    while True:
        await ws.send(mic.frame().tobytes())
        caller.bytes += _ws_bytes(2 * FRAME, True)
        n += 1
        await anyio.sleep(max(0.0, t0 + n * 0.02 - time.monotonic()))


def _turn_end(turn: int) -> Callable[[dict[str, Any]], bool]:
    return lambda event: event["type"] == "turn.end" and event["turn"] == turn


async def _webrtc_caller(
    url: str, question: np.ndarray, end: int, turns: int, delay: float
) -> Caller:
    caller = Caller()
    started = time.monotonic()
    async with WebRtcClient(url) as client:
        await client.start(input_audio={})
        await anyio.sleep(delay)
        for turn in range(1, turns + 1):
            since = len(client.received.frames)
            said_at = (
                time.monotonic() + client.mic.play(question, RATE) - (len(question) - end) / RATE
            )
            heard = None
            with anyio.move_on_after(30) as scope:
                while heard is None:
                    got = client.received
                    for i in range(since, len(got.arrivals)):
                        if got.arrivals[i] > said_at and _rms(got.frames[i][1]) > SOUND_RMS:
                            heard = got.arrivals[i]
                            break
                    since = max(since, len(client.received.frames) - 1)
                    await anyio.sleep(0.05)  # (arrivals carry their own times)
                await client.wait_for(_turn_end(turn), 30)
            if heard is None or scope.cancelled_caught:
                caller.failed += 1
            else:
                caller.v2v_ms.append((heard - said_at) * 1000)
            await anyio.sleep(0.5)
        for report in (await client.pc.getStats()).values():
            if report.type == "transport":
                caller.bytes += report.bytesSent + report.bytesReceived
    caller.seconds = time.monotonic() - started
    return caller


async def _level(
    url: str, pid: int, question: str, transport: str, sessions: int, turns: int
) -> dict[str, Any]:
    said, (_, end) = read_question(question, RATE), voiced_span(question, RATE)
    rng = random.Random(sessions)
    callers: list[Caller] = []
    run = _webrtc_caller if transport == "webrtc" else _websocket_caller

    async def one(delay: float) -> None:
        try:
            callers.append(await run(url, said, end, turns, delay))
        except Exception as exc:  # a session lost under load: counted, the others go on
            print(f"a {transport} session failed: {str(exc)[:200]}", file=sys.stderr)
            callers.append(Caller(failed=turns))

    cpu0, t0 = cpu_s(pid), time.monotonic()
    async with anyio.create_task_group() as tg:
        for _ in range(sessions):
            tg.start_soon(one, rng.uniform(0, 2.0))
    cpu, wall = cpu_s(pid) - cpu0, time.monotonic() - t0
    v2v = [ms for c in callers for ms in c.v2v_ms]
    session_s = max(1e-9, sum(c.seconds for c in callers))
    return {
        "transport": transport,
        "sessions": sessions,
        "v2v_ms_median": statistics.median(v2v) if v2v else None,
        "v2v_ms_p90": float(np.percentile(v2v, 90)) if v2v else None,
        "kbit_s": sum(c.bytes for c in callers) * 8 / 1000 / session_s,
        "cpu_ms_per_session_s": cpu * 1000 / session_s,
        "cpu_cores": cpu / wall,
        "failed_turns": sum(c.failed for c in callers),
        "turns": len(v2v),
    }


def run(
    levels: list[int], runs: int, turns: int, transports: tuple[str, ...] = ("websocket", "webrtc")
) -> list[dict[str, Any]]:
    setup = voice_serve_setup()
    results = []
    with voice_fakes(setup) as fakes:
        folder = Path(tempfile.mkdtemp(prefix="bench-webrtc-"))  # (its serve logs stay)
        for n in levels:
            for transport in transports:
                for i in range(runs):
                    with serving(fakes, f"{transport}-{n}-{i}", folder=folder) as server:
                        http = server.url.replace("ws", "http", 1)
                        args = (http, server.pid, setup.question, transport, n, turns)
                        result = anyio.run(_level, *args)
                    result["run"] = i + 1
                    print(json.dumps(result), flush=True)
                    results.append(result)
    return results


if __name__ == "__main__":
    args = sys.argv[1:]
    runs = int(args[args.index("--runs") + 1]) if "--runs" in args else 2
    turns = int(args[args.index("--turns") + 1]) if "--turns" in args else 2
    sizes = [
        int(a)
        for i, a in enumerate(args)
        if a.isdigit() and (i == 0 or not args[i - 1].startswith("--"))
    ]
    only = tuple(t for t in ("websocket", "webrtc") if t in args) or ("websocket", "webrtc")
    run(sizes or [1, 50], runs, turns, only)

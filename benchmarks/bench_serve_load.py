"""Load benchmark of ``voice-membrane serve``: N concurrent sessions on one process.

For each N in ``LEVELS`` a fresh ``voice-membrane serve`` process (one, on
loopback) runs a pipeline file written here: the LLM is ``FakeOpenAI`` playing
``REPLY`` (first delta after ``LLM_TTFT_S``, one ``DELTA_CHARS``-character delta
— about a token — every ``TOKEN_S``), the TTS ``FakeElevenLabs`` (the
stream-input socket) answering each piece after ``TTS_TTFB_S`` and releasing
its audio paced by characters (``SpeechScript.char_s``). Each fake runs in a
child process of its own, so the server's CPU is its own (the machine's cores
are not: the report says what the fakes and clients used).

Clients: ``N`` sessions over ``ceil(N / SESSIONS_PER_CLIENT)`` client processes
(asyncio, ``websockets``). All sessions connect (``session.start``) first; then
each starts its first turn at a random moment within ``RAMP_S`` (so turns
overlap as a steady load rather than a thundering herd) and runs ``TURNS``
turns, each sent ``THINK_S`` after the previous reply finished playing. Per
turn, client side:

- *first audio*: the first binary frame of the turn after ``user.message`` was
  sent;
- *underruns*: playback starts at the first frame's arrival and frames play
  back to back (their duration from their size); a frame arriving after its
  scheduled play time is an underrun (the audio queued ran out), and playback
  resumes at its arrival;
- *errors*: ``error`` events, a ``turn.end`` with an error, a close other than
  the session's own ``session.end``, lost frames (a gap in sequence numbers),
  a turn with no audio or that did not end within ``TURN_TIMEOUT_S``.

Each client process also measures its own event-loop lag (a 10 ms ticker's
overshoot) and CPU, so a client that could not keep up is seen, not mistaken
for the server. Server side: CPU (user + system, ``/proc/PID/stat``) over the
turns, and resident memory (``/proc/PID/status`` ``VmRSS``, sampled) above the
process's own before the sessions connected.

*Ideal* first audio = TTFT + the deltas up to the one that completes the first
piece (the pipeline's own ``SpeechChunker`` options, fed the scripted deltas) x
``TOKEN_S`` + the TTS TTFB; *excess* = measured - ideal.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio

from benchmarks.child import Child, child_process

ROOT = Path(__file__).resolve().parent.parent
LEVELS = (50, 100, 200, 400)
TURNS = 3
LLM_TTFT_S = 0.3
TOKEN_S = 0.025
DELTA_CHARS = 4
TTS_TTFB_S = 0.1
# The fake releases each piece's audio over PACE x its duration. Its pacing is a
# sleep per frame (it only overshoots, so its lateness adds up) spread by a rough
# per-character alignment: at exactly real time it would fall behind its own audio
# by itself. Below real time by this much the fake keeps ahead, as a real service
# (faster than real time) does; the server's ~200 ms lead is then the client's
# buffer.
PACE = 0.8
REPLY = "The weather stays mild and dry today, with a light breeze."  # ~3 s of speech
PROMPT = "What's the weather like today?"
SAMPLE_RATE = 24000
RAMP_S = 4.0
THINK_S = 0.5
TURN_TIMEOUT_S = 15.0  # keeps an overloaded run short; a turn that long has failed
SESSIONS_PER_CLIENT = 100  # a client process reads ~10k frames/s at most: keep it far below
LAG_TICK_S = 0.01
KEY = "bench-key"
VOICE = "fake-voice"
MODEL = "gpt-bench"
# The server's ready line names its URL (http:// for the page, ws:// for sessions).
_READY = re.compile(r"(?:http|ws)://(127\.0\.0\.1:[0-9]+)")


# --------------------------------------------------------------------------- the reply


def _script(char_s: float) -> tuple[Any, Any]:
    from voice_membrane.testing.fake_speech import SpeechScript
    from voice_membrane.testing.script import ScriptedReply

    reply = ScriptedReply.of(
        REPLY, ttft_s=LLM_TTFT_S, delta_delay_s=TOKEN_S, delta_chars=DELTA_CHARS
    )
    return reply, SpeechScript(ttfb_s=TTS_TTFB_S, char_s=char_s)


def _pipeline_toml() -> str:
    return (
        'description = "load benchmark: fake OpenAI chat + fake ElevenLabs socket"\n\n'
        "[llm]\n"
        f'spec = "openai:{MODEL}"\n'
        'formatter = "native"\n'
        "max_tokens = 400\n\n"
        "[tts]\n"
        f'spec = "elevenlabs:{VOICE}"\n\n'
        "[sink]\n"
        'kind = "null"\n'
    )


@dataclass(frozen=True, slots=True)
class Ideal:
    first_piece: str
    deltas: int  # the deltas up to and including the one that completes the first piece
    first_audio_ms: float


def ideal_first_audio(pipeline: Path) -> Ideal:
    """When the first audio could come at best: the scripted reply through the
    pipeline's chunker, plus the scripted waits."""
    from voice_membrane.chunking import SpeechChunker
    from voice_membrane.pipeline.config import load_pipeline

    reply, _ = _script(0.0)
    options = load_pipeline(pipeline).chunker.model_dump()
    chunker = SpeechChunker(**options)
    for index, delta in enumerate(reply.pieces(REPLY)):
        chunks = chunker.feed(delta)
        if chunks:
            ms = (LLM_TTFT_S + index * TOKEN_S + TTS_TTFB_S) * 1000
            return Ideal(chunks[0].text, index + 1, ms)
    chunks = chunker.flush()
    ms = (LLM_TTFT_S + (len(list(reply.pieces(REPLY))) - 1) * TOKEN_S + TTS_TTFB_S) * 1000
    return Ideal(chunks[0].text if chunks else REPLY, len(list(reply.pieces(REPLY))), ms)


def _char_s() -> float:
    """Seconds of audio per character of ``REPLY`` as the fake speaks it, x ``PACE``."""
    from voice_membrane.testing.fake_speech import ESPEAK_RATE, speak

    samples = anyio.run(speak, REPLY)
    return PACE * len(samples) / ESPEAK_RATE / len(REPLY)


# --------------------------------------------------------------------------- the fakes


def _serve_fake(kind: str, char_s: float) -> None:
    from voice_membrane.testing.fake_elevenlabs import FakeElevenLabs
    from voice_membrane.testing.fake_openai import FakeOpenAI

    reply, speech = _script(char_s)
    server = (
        FakeOpenAI(*[reply] * 20_000)
        if kind == "llm"
        else FakeElevenLabs(*[speech] * 20_000, api_key=KEY)
    )
    server.start()
    print(server.base_url, flush=True)
    sys.stdin.read()  # until the parent closes it


def _child(args: list[str]) -> contextlib.AbstractContextManager[Child]:
    """A ``python -m benchmarks.bench_serve_load`` child (a fake or a client process)."""
    return child_process("benchmarks.bench_serve_load", args)


# --------------------------------------------------------------------------- the server


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextlib.contextmanager
def _serve(pipeline: Path, env: dict[str, str], log: IO[str]) -> Iterator[tuple[str, int]]:
    """``voice-membrane serve`` on a free loopback port: (its ws:// URL, its pid)."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voice_membrane.cli",
            "serve",
            "--pipeline",
            str(pipeline),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        env=env,
    )
    try:
        url = _wait_ready(process, Path(log.name))
        yield url, process.pid
    finally:
        process.terminate()  # SIGTERM: the server drains (nothing is running by now)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            match = _READY.search(line)
            if match:
                return f"ws://{match.group(1)}"
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"voice-membrane serve exited ({process.returncode}): {tail}")
        time.sleep(0.05)
    raise RuntimeError("voice-membrane serve printed no URL in time")


# --------------------------------------------------------------------------- the client


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


_SERVER_STAMPS = ("first_token", "first_chunk", "tts_request", "tts_first_byte", "first_audio")


def _server_figures(report: dict[str, Any]) -> dict[str, float | None]:
    stamps = report.get("stamps_ms") or {}
    return {name: stamps.get(name) for name in _SERVER_STAMPS}


class _Session:
    def __init__(self, url: str, result: ClientResult) -> None:
        self.url = url
        self.result = result
        self.ws: Any = None
        self.last_seq: int | None = None
        self.play_end = 0.0  # when the audio received so far has finished playing

    async def open(self) -> None:
        from websockets.asyncio.client import connect

        self.ws = await connect(self.url + "/v1/session", compression=None, open_timeout=60)
        audio = {"encoding": "pcm16", "sample_rate": SAMPLE_RATE}
        await self.ws.send(json.dumps({"type": "session.start", "v": 1, "audio": audio}))
        with anyio.fail_after(60):
            event = json.loads(await self.ws.recv())
        if event.get("type") != "session.started":
            raise RuntimeError(f"expected session.started, got {event}")

    async def run(self, delay: float, turns: int) -> None:
        await anyio.sleep(delay)
        for number in range(1, turns + 1):
            record = TurnRecord(number)
            self.result.turns.append(record)
            try:
                with anyio.fail_after(TURN_TIMEOUT_S):
                    await self._turn(number, record)
            except TimeoutError:
                record.errors.append("timeout")
                return
            except Exception as error:  # a close, mostly: this session is over
                record.errors.append(_describe(error))
                return
            await anyio.sleep(max(0.0, self.play_end - time.perf_counter()) + THINK_S)

    async def _turn(self, number: int, record: TurnRecord) -> None:
        ws = self.ws
        await ws.send(json.dumps({"type": "user.message", "text": PROMPT}))
        sent = time.perf_counter()
        first: float | None = None
        while True:
            message = await ws.recv()
            now = time.perf_counter()
            if isinstance(message, bytes):
                turn, seq = (
                    int.from_bytes(message[:4], "little"),
                    int.from_bytes(message[4:8], "little"),
                )
                if self.last_seq is not None and seq != self.last_seq + 1:
                    record.errors.append(f"lost {seq - self.last_seq - 1} frame(s)")
                self.last_seq = seq
                if turn != number:
                    continue  # an earlier turn's frame: dropped, as a player does
                seconds = (len(message) - 8) / 2 / SAMPLE_RATE
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
                return

    async def close(self) -> None:
        from websockets.exceptions import ConnectionClosed

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


def _describe(error: BaseException) -> str:
    from websockets.exceptions import ConnectionClosed

    if isinstance(error, ConnectionClosed):
        received = error.rcvd
        return f"closed {received.code if received else 'without a close frame'}"
    return type(error).__name__


async def _lag(samples: list[float]) -> None:
    while True:
        start = time.perf_counter()
        await anyio.sleep(LAG_TICK_S)
        samples.append((time.perf_counter() - start - LAG_TICK_S) * 1000)


async def _client(
    url: str, sessions: int, turns: int, ramp_s: float, seed: int, go: Callable[[], Any]
) -> str:
    """Open ``sessions`` sessions, wait for ``go`` (awaitable), run the turns; the
    result as one JSON line."""
    result = ClientResult()
    opened: list[_Session] = []
    async with anyio.create_task_group() as group:

        async def open_one() -> None:
            session = _Session(url, result)
            try:
                await session.open()
            except Exception as error:  # counted: the session runs no turn
                result.errors.append(f"connect: {_describe(error)}")
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
                turns_group.start_soon(session.run, rng.uniform(0, ramp_s), turns)
        result.wall_s = time.perf_counter() - began
        group.cancel_scope.cancel()
    after = resource.getrusage(resource.RUSAGE_SELF)
    result.cpu_s = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    async with anyio.create_task_group() as group:
        for session in opened:
            group.start_soon(session.close)
    return json.dumps(asdict(result))


def _client_main(url: str, sessions: int, turns: int, ramp_s: float, seed: int) -> None:
    async def go() -> None:
        print("connected", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)

    print(anyio.run(_client, url, sessions, turns, ramp_s, seed, go), flush=True)


async def _warm_up(url: str) -> None:
    """One turn, interrupted at its first audio: the server's lazy imports and
    connection pools, and the fake's speech cache, are then warm."""
    session = _Session(url, ClientResult())
    await session.open()
    ws = session.ws
    await ws.send(json.dumps({"type": "user.message", "text": PROMPT}))
    with anyio.fail_after(TURN_TIMEOUT_S):
        while not isinstance(await ws.recv(), bytes):
            pass
        await ws.send(json.dumps({"type": "interrupt"}))
        while True:
            message = await ws.recv()
            if isinstance(message, str) and json.loads(message).get("type") == "turn.end":
                break
    await session.close()


# --------------------------------------------------------------------------- one level


@dataclass
class LevelResult:
    sessions: int
    turns: list[TurnRecord]
    errors: list[str]  # outside turns
    clients: int
    client_lag_ms: list[float]
    client_cpu_cores: float  # the client processes together, over the turns
    fakes_cpu_cores: float
    server_cpu_cores: float
    server_rss_base_mb: float
    server_rss_peak_mb: float
    seconds: float  # the turns' wall time

    @property
    def rss_per_session_mb(self) -> float:
        return max(0.0, self.server_rss_peak_mb - self.server_rss_base_mb) / self.sessions

    def error_count(self) -> int:
        return len(self.errors) + sum(len(t.errors) for t in self.turns)


def _run_level(
    sessions: int,
    turns: int,
    ramp_s: float,
    pipeline: Path,
    env: dict[str, str],
    fake_pids: list[int],
    folder: Path,
) -> LevelResult:
    with (
        open(folder / f"serve-{sessions}.log", "w+", encoding="utf-8") as log,
        _serve(pipeline, env, log) as (url, pid),
    ):
        anyio.run(_warm_up, url)
        rss_base = _rss_mb(pid)
        count = max(1, math.ceil(sessions / SESSIONS_PER_CLIENT))
        shares = [sessions // count + (i < sessions % count) for i in range(count)]
        with contextlib.ExitStack() as stack:
            clients = [
                stack.enter_context(
                    _child(["--client", url, str(n), str(turns), repr(ramp_s), str(i)])
                )
                for i, n in enumerate(shares)
            ]
            for client in clients:
                if client.line != "connected":
                    raise RuntimeError(f"a client process said {client.line!r}")
            rss_peak = _rss_mb(pid)
            server_cpu, fakes_cpu = _cpu_s(pid), sum(_cpu_s(p) for p in fake_pids)
            began = time.perf_counter()
            for client in clients:
                assert client.process.stdin is not None
                client.process.stdin.write("go\n")
                client.process.stdin.flush()
            lines: list[str] = []
            for client in clients:
                assert client.process.stdout is not None
                while (line := _readline_sampling(client.process.stdout, pid)) is None:
                    rss_peak = max(rss_peak, _rss_mb(pid))
                lines.append(line)
                rss_peak = max(rss_peak, _rss_mb(pid))
            seconds = time.perf_counter() - began
            server_cpu = _cpu_s(pid) - server_cpu
            fakes_cpu = sum(_cpu_s(p) for p in fake_pids) - fakes_cpu
    records: list[TurnRecord] = []
    errors: list[str] = []
    lag: list[float] = []
    client_cpu = 0.0
    client_wall = 0.0
    for line in lines:
        if not line:
            errors.append("a client process died")
            continue
        data = json.loads(line)
        records += [TurnRecord(**t) for t in data["turns"]]
        errors += data["errors"]
        lag += data["lag_ms"]
        client_cpu += data["cpu_s"]
        client_wall = max(client_wall, data["wall_s"])
    return LevelResult(
        sessions=sessions,
        turns=records,
        errors=errors,
        clients=len(shares),
        client_lag_ms=lag,
        client_cpu_cores=client_cpu / client_wall if client_wall else 0.0,
        fakes_cpu_cores=fakes_cpu / seconds,
        server_cpu_cores=server_cpu / seconds,
        server_rss_base_mb=rss_base,
        server_rss_peak_mb=rss_peak,
        seconds=seconds,
    )


def _readline_sampling(stream: IO[str], pid: int) -> str | None:
    """A line from ``stream``, or None after 0.2 s without one (time to sample)."""
    import select

    ready, _, _ = select.select([stream], [], [], 0.2)
    if not ready:
        return None
    return stream.readline().strip()


# --------------------------------------------------------------------------- the run


@dataclass
class ServeLoadResults:
    levels: list[LevelResult]
    ideal: Ideal
    turns: int
    char_s: float
    load_before: float  # 1-minute load average
    load_after: float
    seconds: float


def run_serve_load_bench(
    levels: tuple[int, ...] = LEVELS,
    turns: int = TURNS,
    ramp_s: float = RAMP_S,
    log: Callable[[str], None] = print,
) -> ServeLoadResults:
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    char_s = _char_s()
    results: list[LevelResult] = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        pipeline = folder / "load.toml"
        pipeline.write_text(_pipeline_toml(), encoding="utf-8")
        ideal = ideal_first_audio(pipeline)
        with (
            _child(["--fake", "llm", repr(char_s)]) as llm,
            _child(["--fake", "tts", repr(char_s)]) as tts,
        ):
            env = {
                **os.environ,
                "OPENAI_BASE_URL": llm.line,
                "OPENAI_API_KEY": KEY,
                "ELEVENLABS_BASE_URL": tts.line,
                "ELEVENLABS_API_KEY": KEY,
            }
            for sessions in levels:
                log(f"serve load bench: {sessions} sessions …")
                results.append(
                    _run_level(
                        sessions,
                        turns,
                        ramp_s,
                        pipeline,
                        env,
                        [llm.process.pid, tts.process.pid],
                        folder,
                    )
                )
    return ServeLoadResults(
        results,
        ideal,
        turns,
        char_s,
        load_before,
        os.getloadavg()[0],
        time.perf_counter() - started,
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--fake"]:
        _serve_fake(sys.argv[2], float(sys.argv[3]))
    elif sys.argv[1:2] == ["--client"]:
        url, sessions, turns, ramp_s, seed = sys.argv[2:7]
        _client_main(url, int(sessions), int(turns), float(ramp_s), int(seed))
    else:
        from benchmarks.report_serve import serve_section

        print(serve_section(run_serve_load_bench()))

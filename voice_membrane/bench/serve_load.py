"""The ``serve`` load measurement: N concurrent sessions on one ``voice-membrane
serve`` process, against the fakes.

For each N a fresh ``serve`` process (one, on loopback: ``serve_process``) runs a
pipeline file written here: the LLM is ``FakeOpenAI`` playing the setup's reply
(first delta after its TTFT, one ``delta_chars``-character delta — about a token
— every ``token_s``), the TTS ``FakeElevenLabs`` (the stream-input socket)
answering each piece after its TTFB and releasing its audio paced by characters
(``SpeechScript.char_s``, the reply's spoken length x ``pace``). Each fake runs
in a child process of its own (``fakes``), so the server's CPU is its own (the
machine's cores are not: the results say what the fakes and clients used).

Clients: N sessions over ``ceil(N / sessions_per_client)`` client processes
(``load_client``: what each turn records). All sessions connect first; then each
runs its turns. Server side: CPU (user + system) over the turns, and resident
memory (sampled) above the process's own before the sessions connected, after
one warm-up turn.

*Ideal* first audio = TTFT + the deltas up to the one that completes the first
piece (the pipeline's own chunker options, fed the scripted deltas) x
``token_s`` + the TTS TTFB; *excess* = measured - ideal.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..pipeline.config import load_pipeline
from .bare_client import BareTarget
from .child import library_env
from .fakes import fakes_process
from .load_client import ClientPlan, TurnRecord, read_result, warm_up
from .scripted import first_piece_delta
from .serve_process import (
    cpu_s,
    group_pids,
    group_rss_mb,
    run_clients,
    serve_process,
    warm_every_worker,
)

if TYPE_CHECKING:
    from ..testing.fake_server import FakeServer
    from ..testing.fake_speech import SpeechScript
    from ..testing.script import ScriptedReply

KEY = "bench-key"
VOICE = "fake-voice"
MODEL = "gpt-bench"
FAKE_REPLIES = 20_000  # queued in each fake: more than any run asks for


@dataclass(frozen=True, slots=True)
class LoadScript:
    """What the fakes play: the reply and its pace, the TTS's first byte, and
    ``pace``, the share of real time the fake takes to release a piece's audio."""

    reply: str
    llm_ttft_s: float
    token_s: float
    delta_chars: int
    tts_ttfb_s: float
    pace: float

    def reply_script(self) -> ScriptedReply:
        from ..testing.script import ScriptedReply

        return ScriptedReply.of(
            self.reply,
            ttft_s=self.llm_ttft_s,
            delta_delay_s=self.token_s,
            delta_chars=self.delta_chars,
        )

    def speech_script(self, char_s: float) -> SpeechScript:
        from ..testing.fake_speech import SpeechScript

        return SpeechScript(ttfb_s=self.tts_ttfb_s, char_s=char_s)

    def char_s(self) -> float:
        """Seconds of audio per character of the reply as the fake speaks it, x ``pace``."""
        from ..testing.fake_speech import ESPEAK_RATE, speak

        samples = anyio.run(speak, self.reply)
        return self.pace * len(samples) / ESPEAK_RATE / len(self.reply)


@dataclass(frozen=True, slots=True)
class LoadSetup:
    script: LoadScript
    client: ClientPlan
    sessions_per_client: int  # a client process reads ~10k frames/s at most
    workers: tuple[int, ...] = (1,)  # serve --workers: each level is run with each


@dataclass(frozen=True, slots=True)
class Ideal:
    first_piece: str
    deltas: int  # the deltas up to and including the one that completes the first piece
    first_audio_ms: float


def ideal_first_audio(script: LoadScript, pipeline: Path) -> Ideal:
    """When the first audio could come at best: the scripted reply through the
    pipeline's chunker, plus the scripted waits."""
    chunker = load_pipeline(pipeline).chunker
    index, piece = first_piece_delta(chunker, script.reply, script.delta_chars)
    ms = (script.llm_ttft_s + index * script.token_s + script.tts_ttfb_s) * 1000
    return Ideal(piece, index + 1, ms)


def pipeline_toml() -> str:
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


def load_fakes(args: dict[str, Any]) -> dict[str, FakeServer]:
    """The fakes' recipe (``fakes``): one fake, the LLM or the TTS, per process."""
    from ..testing.fake_elevenlabs import FakeElevenLabs
    from ..testing.fake_openai import FakeOpenAI

    script = LoadScript(**args["script"])
    if args["kind"] == "llm":
        return {"llm": FakeOpenAI(*[script.reply_script()] * FAKE_REPLIES)}
    speech = script.speech_script(args["char_s"])
    return {"tts": FakeElevenLabs(*[speech] * FAKE_REPLIES, api_key=KEY)}


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
    workers: int = 1  # serve --workers; CPU and memory count every process of the group
    burst: bool = False  # every session's turns started at once (no ramp)
    bare: bool = False  # the bare protocol client in the server's place (bare_client)
    # With ``bare``: the CPU of pacing its audio out to a client (delivery_floor),
    # ms per second of audio.
    delivery_ms_per_audio_s: float | None = None

    @property
    def label(self) -> str:
        if self.bare:
            return f"{self.sessions}, bare client"
        return f"{self.sessions}, burst" if self.burst else str(self.sessions)

    @property
    def rss_per_session_mb(self) -> float:
        return max(0.0, self.server_rss_peak_mb - self.server_rss_base_mb) / self.sessions

    def error_count(self) -> int:
        return len(self.errors) + sum(len(t.errors) for t in self.turns)

    @property
    def cpu_ms_per_audio_s(self) -> float | None:
        """The server's CPU (every process of the group) per second of audio
        the clients received, in ms."""
        audio_s = sum(t.audio_s for t in self.turns)
        return self.server_cpu_cores * self.seconds * 1000 / audio_s if audio_s else None


def _run_level(
    setup: LoadSetup,
    sessions: int,
    pipeline: Path,
    env: dict[str, str],
    fake_pids: list[int],
    folder: Path,
    workers: int = 1,
) -> LevelResult:
    plan = json.dumps(asdict(setup.client))
    with (
        open(folder / f"serve-{sessions}-{workers}.log", "w+", encoding="utf-8") as log,
        serve_process(pipeline, env, log, workers) as (url, pid),
    ):
        warm_every_worker(lambda: anyio.run(warm_up, url, setup.client), workers, Path(log.name))
        rss_base = group_rss_mb(group_pids(pid))
        count = max(1, math.ceil(sessions / setup.sessions_per_client))
        shares = [sessions // count + (i < sessions % count) for i in range(count)]
        run = run_clients("voice_membrane.bench.load_client", plan, url, shares, pid, fake_pids)
    lines, seconds, rss_peak = run.lines, run.seconds, run.rss_peak_mb
    server_cpu, fakes_cpu = run.server_cpu_s, run.fakes_cpu_s
    records: list[TurnRecord] = []
    errors: list[str] = []
    lag: list[float] = []
    client_cpu = 0.0
    client_wall = 0.0
    for line in lines:
        if not line:
            errors.append("a client process died")
            continue
        result = read_result(line)
        records += result.turns
        errors += result.errors
        lag += result.lag_ms
        client_cpu += result.cpu_s
        client_wall = max(client_wall, result.wall_s)
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
        workers=workers,
    )


@dataclass
class ServeLoadResults:
    setup: LoadSetup
    levels: list[LevelResult]
    ideal: Ideal
    char_s: float
    load_before: float  # 1-minute load average
    load_after: float
    seconds: float


def _run_bare(
    setup: LoadSetup, sessions: int, target: BareTarget, fake_pids: list[int]
) -> LevelResult:
    """``sessions`` of the bare protocol client (``bare_client``) in one process,
    in the server's place: its CPU is the process's own over the turns."""
    from .child import bench_child

    args = [json.dumps(asdict(target)), json.dumps(asdict(setup.client)), str(sessions), "0"]
    with bench_child("voice_membrane.bench.bare_client", args) as child:
        if child.line != "connected":
            raise RuntimeError(f"the bare client said {child.line!r}")
        fakes_before = sum(cpu_s(pid) for pid in fake_pids)
        assert child.process.stdin is not None and child.process.stdout is not None
        child.process.stdin.write("go\n")
        child.process.stdin.flush()
        line = child.process.stdout.readline().strip()
        fakes_cpu = sum(cpu_s(pid) for pid in fake_pids) - fakes_before
    result = read_result(line)
    seconds = result.wall_s or 1.0
    audio = [turn.audio_s for turn in result.turns if turn.audio_s]
    delivery = _run_delivery(setup, sessions, sum(audio) / len(audio)) if audio else None
    return LevelResult(
        sessions=sessions,
        turns=result.turns,
        errors=result.errors,
        clients=1,
        client_lag_ms=result.lag_ms,
        client_cpu_cores=0.0,
        fakes_cpu_cores=fakes_cpu / seconds,
        server_cpu_cores=result.cpu_s / seconds,
        server_rss_base_mb=0.0,
        server_rss_peak_mb=0.0,
        seconds=seconds,
        bare=True,
        delivery_ms_per_audio_s=delivery,
    )


def _run_delivery(setup: LoadSetup, sessions: int, audio_s: float) -> float | None:
    """The CPU of pacing ``sessions`` sessions' audio (``audio_s`` a turn) out to
    clients, ms per second of audio (``delivery_floor``)."""
    args = [json.dumps(asdict(setup.client)), str(sessions), f"{audio_s:.3f}", "0"]
    command = [sys.executable, "-m", "voice_membrane.bench.delivery_floor", *args]
    plan = setup.client
    timeout_s = 60 + plan.ramp_s + plan.turns * (audio_s + plan.think_s + 1)
    done = subprocess.run(
        command, env=library_env(), capture_output=True, text=True, check=True, timeout=timeout_s
    )
    result = json.loads(done.stdout)
    if result["errors"] or not result["audio_s"]:
        return None
    return float(result["cpu_s"]) * 1000 / float(result["audio_s"])


def run_serve_load(
    setup: LoadSetup,
    levels: Sequence[int],
    log: Callable[[str], None] = print,
    burst_levels: Sequence[int] = (),
    bare_levels: Sequence[int] = (),
) -> ServeLoadResults:
    """Each of ``levels`` sessions at once, in turn, each on a fresh server; then
    each of ``burst_levels`` on one process with every session's first turn sent
    at the same moment (no ramp: the turns stay bunched); then each of
    ``bare_levels`` as bare protocol clients in the server's place (the floor)."""
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    char_s = setup.script.char_s()
    results: list[LevelResult] = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        pipeline = folder / "load.toml"
        pipeline.write_text(pipeline_toml(), encoding="utf-8")
        ideal = ideal_first_audio(setup.script, pipeline)
        script = asdict(setup.script)
        with (
            fakes_process(load_fakes, {"kind": "llm", "script": script}) as llm,
            fakes_process(load_fakes, {"kind": "tts", "script": script, "char_s": char_s}) as tts,
        ):
            env = library_env(
                {
                    **os.environ,
                    "OPENAI_BASE_URL": llm.urls()["llm"],
                    "OPENAI_API_KEY": KEY,
                    "ELEVENLABS_BASE_URL": tts.urls()["tts"],
                    "ELEVENLABS_API_KEY": KEY,
                }
            )
            for workers in setup.workers:
                for sessions in levels:
                    log(f"serve load bench: {sessions} sessions, {workers} worker(s) …")
                    results.append(
                        _run_level(
                            setup, sessions, pipeline, env, [llm.pid, tts.pid], folder, workers
                        )
                    )
            bunched = replace(setup, client=replace(setup.client, ramp_s=0.0))
            for sessions in burst_levels:
                log(f"serve load bench: {sessions} sessions, all at once …")
                level = _run_level(bunched, sessions, pipeline, env, [llm.pid, tts.pid], folder)
                level.burst = True
                results.append(level)
            target = BareTarget(
                llm.urls()["llm"],
                tts.urls()["tts"],
                MODEL,
                VOICE,
                ideal.deltas,
                setup.client.sample_rate,
            )
            for sessions in bare_levels:
                log(f"serve load bench: {sessions} bare protocol clients …")
                results.append(_run_bare(setup, sessions, target, [llm.pid, tts.pid]))
    return ServeLoadResults(
        setup,
        results,
        ideal,
        char_s,
        load_before,
        os.getloadavg()[0],
        time.perf_counter() - started,
    )

"""Voice to voice over the served endpoint: N concurrent callers speaking to one
``voice-membrane serve`` process (protocol 1.1), against cloud fakes of fixed
service times.

For each N a fresh ``serve`` process (``serve_process``) runs a pipeline file
written here: ``[stt]`` the ``deepgram`` engine against ``FakeDeepgram``
(every word of the question heard in the first 50 ms of each utterance's
stream, a ``Finalize`` answered after ``finalize_s``), ``[llm]`` ``FakeOpenAI``
and ``[tts]`` ``FakeElevenLabs``' stream-input socket as in ``serve_load`` (the
same ``LoadScript``), ``[endpoint] preemptive = false`` (the reply starts at
the decided end of the turn, so the arithmetic below holds) and the given
``end_silence_s``. Each fake runs in a child process of its own.

Callers (``voice_caller``: what each question records): N sessions over
``ceil(N / callers_per_client)`` client processes, each sending pcm16 16 kHz
frames in real time from the moment it is told to go (silence, and its
question at a random moment within the ramp, then again after each answer).

*Engines' own* time, from the question's last voiced sample to the answer's
first audio: the endpointer's ``end_silence_s`` (the STT's final comes
``vad.min_silence_s`` + ``finalize_s`` after the speech end, within that
silence: the longer of the two counts), then the LLM's TTFT + the deltas up to
the first piece x ``token_s`` + the TTS's TTFB (``serve_load.ideal_first_audio``).
*Added by our code* = voice to voice at the client - engines' own: the
detector's dating of the speech end, the server's work, the loopback both ways.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..listening.settings import VadSettings
from .call_log import fill_from_log
from .child import library_env
from .fakes import fakes_process
from .serve_load import KEY, LoadScript, ideal_first_audio, load_fakes
from .serve_load import pipeline_toml as reply_toml
from .serve_process import (
    group_pids,
    group_rss_mb,
    run_clients,
    serve_process,
    warm_every_worker,
)
from .voice_caller import (
    CallerPlan,
    CallerResult,
    VoiceTurnRecord,
    read_caller_result,
    read_question,
)
from .voice_callers import warm_up_call
from .voice_serve_figures import CallLevel, EnginesOwn, level_summary
from .voiced import voiced_bounds

if TYPE_CHECKING:
    from ..testing.fake_server import FakeServer

KEY_ENV = "VOICE_MEMBRANE_BENCH_STT_KEY"
STT_SCRIPTS = 20_000  # queued in the fake: more utterances than any run has


@dataclass(frozen=True, slots=True)
class VoiceServeSetup:
    """What the fakes play (``reply``), the question said and what the fake STT
    hears in it, the STT's finalize time, the end silence, and the callers'
    plan (its ``voiced_end`` is found here from the question's level)."""

    reply: LoadScript
    question: str  # a mono WAV at plan.sample_rate
    question_text: str
    finalize_s: float
    end_silence_s: float
    plan: CallerPlan
    callers_per_client: int
    interrupt: str | None = None  # barge-in levels: said into each answer (a mono WAV)
    barge_turns: int = 2  # each barge-in caller's questions

    def plan_for(self, level: Level) -> CallerPlan:
        """The callers' plan for ``level``: its route, and with ``barge`` the
        interruption (its onset found from its level)."""
        changes: dict[str, Any] = {"route": level.route}
        if level.turns is not None:
            changes["turns"] = level.turns
        if level.barge:
            assert self.interrupt is not None
            onset, _ = voiced_span(self.interrupt, self.plan.sample_rate)
            changes |= {
                "interrupt": self.interrupt,
                "interrupt_onset": onset,
                "turns": level.turns or self.barge_turns,
            }
        return CallerPlan(**{**asdict(self.plan), **changes})


@dataclass(frozen=True, slots=True)
class Level:
    """One size measured: ``callers`` at once on ``route`` (``session``: protocol
    1.1 on ``/v1/session``; ``twilio``: phone calls on ``/v1/twilio``), each
    interrupting every answer if ``barge``; ``turns`` (default: the plan's);
    ``workers``: serve's worker processes."""

    callers: int
    route: str = "session"
    barge: bool = False
    turns: int | None = None
    workers: int = 1

    @property
    def label(self) -> str:
        route = "/v1/twilio" if self.route == "twilio" else "/v1/session"
        return f"{route}, {self.callers}{workers_note(self.workers)}"


def workers_note(workers: int) -> str:
    return f", {workers} workers" if workers > 1 else ""


def voiced_span(path: str, rate: int) -> tuple[int, int]:
    """The first and the last voiced sample of a recording (``voiced.py``)."""
    try:
        return voiced_bounds(read_question(path, rate), rate)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def stt_fakes(args: dict[str, Any]) -> dict[str, FakeServer]:
    """The fakes' recipe (``fakes``): the STT's, or ``serve_load``'s LLM or TTS."""
    if args["kind"] != "stt":
        return load_fakes(args)
    from ..testing.fake_deepgram import FakeDeepgram
    from ..testing.transcript_script import TranscriptScript

    script = TranscriptScript.of(
        args["text"], word_s=0.005, gap_s=0.0, lead_s=0.0, finalize_s=args["finalize_s"]
    )
    return {"stt": FakeDeepgram(*[script] * STT_SCRIPTS, api_key=KEY)}


def pipeline_toml(stt_url: str, end_silence_s: float) -> str:
    return (
        reply_toml()
        + "\n[stt]\n"
        + 'spec = "deepgram:nova-3"\n'
        + f'base_url = "{stt_url}"\n'
        + f'api_key_env = "{KEY_ENV}"\n'
        + "retry = false\n\n"
        + "[endpoint]\n"
        + "preemptive = false\n"
        + f"end_silence_s = {end_silence_s}\n"
        + 'echo = "aec"\n'  # the caller's microphone hears no reply (as a browser's)
    )


def engines_own(setup: VoiceServeSetup, pipeline: Path) -> EnginesOwn:
    ideal = ideal_first_audio(setup.reply, pipeline)
    final_ms = (VadSettings().min_silence_s + setup.finalize_s) * 1000
    endpointing_ms = max(setup.end_silence_s * 1000, final_ms)
    return EnginesOwn(
        endpointing_ms,
        final_ms,
        ideal.first_audio_ms,
        ideal.first_piece,
        ideal.deltas,
        setup.reply.llm_ttft_s * 1000,
        setup.reply.tts_ttfb_s * 1000,
    )


def _run_level(
    setup: VoiceServeSetup,
    plan: CallerPlan,
    callers: int,
    pipeline: Path,
    env: dict[str, str],
    fake_pids: list[int],
    folder: Path,
    workers: int = 1,
) -> CallLevel:
    plan_json = json.dumps(asdict(plan))
    name = f"serve-{plan.route}-{callers}-{workers}{'-barge' if plan.interrupt else ''}.log"
    with (
        open(folder / name, "w+", encoding="utf-8") as log,
        serve_process(pipeline, env, log, workers) as (url, pid),
    ):
        warm_every_worker(lambda: _warm_up(url, setup.plan), workers, Path(log.name))
        rss_base = group_rss_mb(group_pids(pid))
        count = max(1, math.ceil(callers / setup.callers_per_client))
        shares = [callers // count + (i < callers % count) for i in range(count)]
        run = run_clients(
            "voice_membrane.bench.voice_callers", plan_json, url, shares, pid, fake_pids
        )
    lines, seconds, rss_peak = run.lines, run.seconds, run.rss_peak_mb
    server_cpu, fakes_cpu = run.server_cpu_s, run.fakes_cpu_s
    results = [read_caller_result(line) if line else None for line in lines]
    level = _level(callers, results, seconds, server_cpu, fakes_cpu, rss_base, rss_peak)
    if plan.route == "twilio" and plan.interrupt is None:  # (no metrics event: logged)
        logged = (folder / name).read_text("utf-8", errors="replace").splitlines()
        level.unmatched = fill_from_log(level.turns, logged)
    level.barge = plan.interrupt is not None
    level.route = plan.route
    level.workers = workers
    return level


def _warm_up(url: str, plan: CallerPlan) -> None:
    """One spoken question: the server's lazy imports (the detector's model, the
    STT SDK) and its connection pools are then warm."""
    warm = anyio.run(warm_up_call, url, plan)
    if warm.errors or any(t.errors for t in warm.turns):
        problems = warm.errors + [e for t in warm.turns for e in t.errors]
        raise RuntimeError(f"the warm-up call failed: {'; '.join(problems)}")


def _level(
    callers: int,
    results: list[CallerResult | None],
    seconds: float,
    server_cpu: float,
    fakes_cpu: float,
    rss_base: float,
    rss_peak: float,
) -> CallLevel:
    turns: list[VoiceTurnRecord] = []
    errors: list[str] = []
    lag: list[float] = []
    late: list[float] = []
    client_cpu = client_wall = 0.0
    for result in results:
        if result is None:
            errors.append("a caller process died")
            continue
        turns += result.turns
        errors += result.errors
        lag += result.lag_ms
        late += result.send_late_ms[1:2]  # its p99
        client_cpu += result.cpu_s
        client_wall = max(client_wall, result.wall_s)
    return CallLevel(
        callers=callers,
        turns=turns,
        errors=errors,
        clients=len(results),
        client_lag_ms=lag,
        send_late_ms=late,
        client_cpu_cores=client_cpu / client_wall if client_wall else 0.0,
        fakes_cpu_cores=fakes_cpu / seconds,
        server_cpu_s=server_cpu,
        server_rss_base_mb=rss_base,
        server_rss_peak_mb=rss_peak,
        seconds=seconds,
    )


@dataclass
class VoiceServeResults:
    setup: VoiceServeSetup
    levels: list[CallLevel]
    barge: list[CallLevel]
    engines: EnginesOwn
    load_before: float  # 1-minute load average
    load_after: float
    seconds: float

    def summary(self) -> dict[str, Any]:
        """The figures by level, as JSON (``figures`` in ms: p50 / p95 / max)."""
        return {
            "engines_ms": asdict(self.engines) | {"total_ms": self.engines.total_ms},
            "levels": [level_summary(level, self.engines) for level in self.levels],
            "barge_in": [level_summary(level, self.engines) for level in self.barge],
            "load": [self.load_before, self.load_after],
            "seconds": round(self.seconds, 1),
        }


@dataclass(frozen=True, slots=True)
class VoiceFakes:
    """The fakes running, and what a ``serve`` on them needs: its pipeline file
    (in ``folder``), its environment; the fakes' pids, the engines' own times."""

    pipeline: Path
    env: dict[str, str]
    pids: list[int]
    engines: EnginesOwn
    folder: Path


@contextlib.contextmanager
def voice_fakes(setup: VoiceServeSetup) -> Iterator[VoiceFakes]:
    """The three fakes (STT, LLM, TTS), each in a process of its own, and the
    pipeline file on them."""
    char_s = setup.reply.char_s()
    script = asdict(setup.reply)
    stt_args = {"kind": "stt", "text": setup.question_text, "finalize_s": setup.finalize_s}
    with (
        tempfile.TemporaryDirectory() as name,
        fakes_process(stt_fakes, {"kind": "llm", "script": script}) as llm,
        fakes_process(stt_fakes, {"kind": "tts", "script": script, "char_s": char_s}) as tts,
        fakes_process(stt_fakes, stt_args) as stt,
    ):
        folder = Path(name)
        pipeline = folder / "voice.toml"
        pipeline.write_text(pipeline_toml(stt.urls()["stt"], setup.end_silence_s), "utf-8")
        env = library_env(
            {
                **os.environ,
                "OPENAI_BASE_URL": llm.urls()["llm"],
                "OPENAI_API_KEY": KEY,
                "ELEVENLABS_BASE_URL": tts.urls()["tts"],
                "ELEVENLABS_API_KEY": KEY,
                KEY_ENV: KEY,
            }
        )
        pids = [llm.pid, tts.pid, stt.pid]
        yield VoiceFakes(pipeline, env, pids, engines_own(setup, pipeline), folder)


def run_voice_serve(
    setup: VoiceServeSetup, levels: Sequence[Level], log: Callable[[str], None] = print
) -> VoiceServeResults:
    """Each of ``levels`` in turn, each on a fresh server."""
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    _, last = voiced_span(setup.question, setup.plan.sample_rate)
    setup = VoiceServeSetup(
        **{**_fields(setup), "plan": CallerPlan(**{**asdict(setup.plan), "voiced_end": last})}
    )
    results: list[CallLevel] = []
    barge: list[CallLevel] = []
    with voice_fakes(setup) as fakes:
        for level in levels:
            log(f"{'barge-in' if level.barge else 'voice'} over {level.label} callers …")
            plan = setup.plan_for(level)
            done = _run_level(
                setup,
                plan,
                level.callers,
                fakes.pipeline,
                fakes.env,
                fakes.pids,
                fakes.folder,
                level.workers,
            )
            (barge if level.barge else results).append(done)
        engines = fakes.engines
    return VoiceServeResults(
        setup,
        results,
        barge,
        engines,
        load_before,
        os.getloadavg()[0],
        time.perf_counter() - started,
    )


def _fields(setup: VoiceServeSetup) -> dict[str, Any]:
    return {name: getattr(setup, name) for name in VoiceServeSetup.__dataclass_fields__}

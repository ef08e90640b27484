"""Voice to voice over the served endpoint: N callers speaking to one
``voice-membrane serve`` process (the runner: ``served``), against cloud fakes
of fixed service times.

The pipeline written here: ``[stt]`` the ``deepgram`` engine against
``FakeDeepgram`` (every word of the question heard in the first 50 ms of each
utterance's stream, a ``Finalize`` answered after ``finalize_s``), ``[llm]``
and ``[tts]`` the serve load's fakes and reply (``LoadScript``), ``[endpoint]
preemptive = false`` (the reply starts at the decided end of the turn, so the
sum below holds) and the given ``end_silence_s``. The callers (``voice_caller``,
``voice_phone_caller``: what each question records) run from client processes.

*Engines' own* time, from the question's last voiced sample to the answer's
first audio: the end silence (the STT's final, ``vad.min_silence_s`` +
``finalize_s`` after the speech end, comes within it: the longer counts), then
the reply's ideal first audio (``serve_load.ideal_first_audio``). *Added by our
code* = voice to voice at the client - engines' own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..listening.settings import VadSettings
from .call_log import fill_from_log
from .serve_load import KEY, LoadScript, fakes_env, ideal_first_audio, load_fakes
from .serve_load import pipeline_toml as reply_toml
from .served import Clock, Fakes, fakes_for_serve, run_level
from .voice_caller import CallerPlan, VoiceTurnRecord, read_question
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
        return replace(self.plan, **changes)


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


async def _warm_up(url: str, plan: CallerPlan) -> None:
    """One spoken question: the server's lazy imports (the detector's model, the
    STT SDK) and its connection pools are then warm."""
    warm = await warm_up_call(url, plan)
    if warm.errors or any(t.errors for t in warm.turns):
        problems = warm.errors + [e for t in warm.turns for e in t.errors]
        raise RuntimeError(f"the warm-up call failed: {'; '.join(problems)}")


def _run_level(setup: VoiceServeSetup, level: Level, fakes: Fakes) -> CallLevel:
    plan = setup.plan_for(level)
    name = f"{level.route}-{level.callers}-{level.workers}{'-barge' if level.barge else ''}"
    warm = partial(_warm_up, plan=setup.plan)
    module = "voice_membrane.bench.voice_callers"
    run = run_level(
        fakes, name, level.workers, warm, module, plan, level.callers,
        setup.callers_per_client, VoiceTurnRecord,
    )  # fmt: skip
    call = CallLevel(
        callers=level.callers,
        send_late_ms=[p99 for r in run.results if r for p99 in r.send_late_ms[1:2]],
        server_cpu_s=run.server_cpu_s,
        barge=level.barge,
        route=level.route,
        workers=level.workers,
        **run.figures(),
    )
    if level.route == "twilio" and not level.barge and run.log:  # (no metrics event: logged)
        logged = run.log.read_text("utf-8", errors="replace").splitlines()
        call.unmatched = fill_from_log(call.turns, logged)
    return call


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


@contextlib.contextmanager
def voice_fakes(setup: VoiceServeSetup) -> Iterator[Fakes]:
    """The three fakes (STT, LLM, TTS), each in a process of its own, and the
    pipeline file on them."""
    stt = {"kind": "stt", "text": setup.question_text, "finalize_s": setup.finalize_s}
    with fakes_for_serve(
        stt_fakes,
        [*setup.reply.fakes(setup.reply.char_s()), stt],
        lambda urls: pipeline_toml(urls["stt"], setup.end_silence_s),
        lambda urls: fakes_env(urls) | {KEY_ENV: KEY},
    ) as fakes:
        yield fakes


def run_voice_serve(
    setup: VoiceServeSetup, levels: Sequence[Level], log: Callable[[str], None] = print
) -> VoiceServeResults:
    """Each of ``levels`` in turn, each on a fresh server."""
    clock = Clock()
    _, last = voiced_span(setup.question, setup.plan.sample_rate)
    setup = replace(setup, plan=replace(setup.plan, voiced_end=last))
    results: list[CallLevel] = []
    barge: list[CallLevel] = []
    with voice_fakes(setup) as fakes:
        for level in levels:
            log(f"{'barge-in' if level.barge else 'voice'} over {level.label} callers …")
            (barge if level.barge else results).append(_run_level(setup, level, fakes))
        engines = engines_own(setup, fakes.pipeline)
    return VoiceServeResults(setup, results, barge, engines, *clock.stop())

"""The ``serve`` load scenario: N concurrent sessions on one ``voice-membrane
serve`` process (the runner: ``served``), against the fakes.

The pipeline written here has the LLM ``FakeOpenAI`` playing the setup's reply
(first delta after its TTFT, one ``delta_chars``-character delta — about a
token — every ``token_s``) and the TTS ``FakeElevenLabs`` (the stream-input
socket) answering each piece after its TTFB, its audio paced by characters
(the reply's spoken length x ``pace``). The sessions run from client processes
(``load_client``: what each turn records); the server's CPU is over the turns,
its memory above its own after a warm-up turn, before the sessions connected.

*Ideal* first audio = TTFT + the deltas up to the one that completes the first
piece (the pipeline's own chunker, fed the scripted deltas) x ``token_s`` + the
TTS TTFB. The floor beside it: the bare protocol client in the server's place
(``bare_client``) and the CPU of pacing its audio out (``delivery_floor``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..pipeline.config import load_pipeline
from .bare_client import BareTarget
from .child import library_env
from .load_client import ClientPlan, TurnRecord, warm_up
from .scripted import first_piece_delta
from .served import Clock, Fakes, LevelRun, fakes_for_serve, run_clients, run_level

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

    def fakes(self, char_s: float) -> list[dict[str, Any]]:
        """The arguments of ``load_fakes``' two processes: the LLM's, the TTS's."""
        script = asdict(self)
        return [
            {"kind": "llm", "script": script},
            {"kind": "tts", "script": script, "char_s": char_s},
        ]


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


def fakes_env(urls: dict[str, str]) -> dict[str, str]:
    """Where the served pipeline's LLM and TTS find their fakes."""
    return {
        "OPENAI_BASE_URL": urls["llm"],
        "OPENAI_API_KEY": KEY,
        "ELEVENLABS_BASE_URL": urls["tts"],
        "ELEVENLABS_API_KEY": KEY,
    }


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


@dataclass
class ServeLoadResults:
    setup: LoadSetup
    levels: list[LevelResult]
    ideal: Ideal
    char_s: float
    load_before: float  # 1-minute load average
    load_after: float
    seconds: float


def _level(sessions: int, run: LevelRun[TurnRecord], **kind: Any) -> LevelResult:
    cpu = run.server_cpu_s / run.seconds
    return LevelResult(sessions, **(run.figures() | {"server_cpu_cores": cpu} | kind))


def _run_served(
    setup: LoadSetup, sessions: int, fakes: Fakes, workers: int = 1, burst: bool = False
) -> LevelResult:
    plan, module = setup.client, "voice_membrane.bench.load_client"
    name = f"{sessions}-{workers}{'-burst' if burst else ''}"
    warm = partial(warm_up, plan=plan)
    per_client = setup.sessions_per_client
    run = run_level(fakes, name, workers, warm, module, plan, sessions, per_client, TurnRecord)
    return _level(sessions, run, workers=workers, burst=burst)


def _run_bare(setup: LoadSetup, sessions: int, target: BareTarget, fakes: Fakes) -> LevelResult:
    """``sessions`` of the bare protocol client (``bare_client``) in one process,
    in the server's place: its CPU is the process's own over the turns."""
    module, where = "voice_membrane.bench.bare_client", json.dumps(asdict(target))
    run = run_clients(module, setup.client, where, [sessions], TurnRecord, fakes.pids)
    (result,) = run.results
    if result is None:
        raise RuntimeError("the bare client died")
    # Over its own turns' wall time: the server's figures are over theirs.
    run = replace(run, seconds=result.wall_s or 1.0, server_cpu_s=result.cpu_s)
    audio = [turn.audio_s for turn in result.turns if turn.audio_s]
    delivery = _run_delivery(setup, sessions, sum(audio) / len(audio)) if audio else None
    return _level(sessions, run, client_cpu_cores=0.0, bare=True, delivery_ms_per_audio_s=delivery)


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
    clock = Clock()
    char_s = setup.script.char_s()
    results: list[LevelResult] = []
    processes = setup.script.fakes(char_s)
    with fakes_for_serve(load_fakes, processes, lambda _: pipeline_toml(), fakes_env) as fakes:
        ideal = ideal_first_audio(setup.script, fakes.pipeline)
        for workers in setup.workers:
            for sessions in levels:
                log(f"serve load bench: {sessions} sessions, {workers} worker(s) …")
                results.append(_run_served(setup, sessions, fakes, workers))
        bunched = replace(setup, client=replace(setup.client, ramp_s=0.0))
        for sessions in burst_levels:
            log(f"serve load bench: {sessions} sessions, all at once …")
            results.append(_run_served(bunched, sessions, fakes, burst=True))
        llm, tts, rate = fakes.urls["llm"], fakes.urls["tts"], setup.client.sample_rate
        target = BareTarget(llm, tts, MODEL, VOICE, ideal.deltas, rate)
        for sessions in bare_levels:
            log(f"serve load bench: {sessions} bare protocol clients …")
            results.append(_run_bare(setup, sessions, target, fakes))
    return ServeLoadResults(setup, results, ideal, char_s, *clock.stop())

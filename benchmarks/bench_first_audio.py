"""First-audio benchmark: warm latency of the embedded pipelines, as ``voice-membrane run``
users experience it.

Each setup is one ``Session`` (engines started once) into a ``NullSink`` that is not real
time, so that a turn lasts no longer than its reply takes to generate and speak: its
``first_audio`` is when the sink took the first sample, as a speaker's callback takes it
(minus the wait for the callback's next 10 ms block, and the device's output latency
after that). One uncounted warm-up turn, then every prompt of ``PROMPTS`` as a fresh
conversation (the history is cleared before each turn). Every turn's ``LatencyReport``
gives the figures; a thin wrapper around the LLM source stamps each text delta's arrival,
so the delta that released the first piece (``first_chunk_token_ms``) can be counted.
Each setup runs in ``SESSIONS`` sessions, one after another and each in its own event
loop, on its share of the prompts; the setups take turns, in reverse order the second
time, so that a change in the machine's load falls on all of them alike. After its turns,
each engine speaks the turns' first pieces again on its own, nothing else running: its
idle time to first audio.
"""

from __future__ import annotations

import bisect
import importlib.util
import os
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from benchmarks.stats import median, nearest_rank
from voice_membrane.bench.prompts import DEFAULT_PROMPTS, WARM_UP_PROMPT
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.metrics import LatencyReport, TurnMetrics
from voice_membrane.pipeline.session import Session
from voice_membrane.pipeline.turn import Turn
from voice_membrane.providers.base import ChatMessage, LlmError, LlmSource
from voice_membrane.providers.local_llama import LocalLlama
from voice_membrane.run_command import DEFAULT_PIPELINE
from voice_membrane.sinks.base import SinkError
from voice_membrane.sinks.null import NullSink
from voice_membrane.tts.base import TtsEngine, TtsError
from voice_membrane.tts.registry import create_engine

REQUIRED_MODULES = ("llama_cpp", "piper")  # without either, the benchmark is not run
PIPELINE_DEFAULT = DEFAULT_PIPELINE  # pipelines/local.toml: LocalLlama + Piper
PIPELINE_ESPEAK = DEFAULT_PIPELINE.with_name("local-espeak.toml")  # LocalLlama + espeak-ng
MAX_TOKENS = 40  # local.toml says 120; first audio does not depend on it, run time does
SEED = 7  # fixed, so every setup hears the same reply to the same prompt
SINK_RATE = 22050  # the rate of both embedded voices
SESSIONS = 2  # per setup; the prompts are split between them
GAP_S = 0.15  # pause before each turn, as a user takes one; lets idle threads settle
IDLE_GAP_S = 0.1  # pause before each idle-engine synthesis
LOCK_POLL_S = 0.005  # as LocalLlama polls its model's lock
HOLD_MAX_S = 1.0  # the hold diagnostic never holds the LLM longer than this
TARGET_ADDED_MS = 5.0  # "the pipeline adds ≤ 5 ms at p50"
TARGET_FIRST_AUDIO_MS = 400.0  # "the embedded default reaches first audio in ≤ 400 ms p50"

# The command's own prompt set: both measure the same questions.
PROMPTS = DEFAULT_PROMPTS


@dataclass(frozen=True, slots=True)
class Setup:
    """One pipeline to measure: a pipeline file's options, with at most a change or two."""

    label: str
    pipeline: Path  # its [llm] temperature, system prompt, [tts] spec and [chunker] are used
    n_threads: int | None = None  # LocalLlama's; None is its default (the CPUs available)
    chunker: tuple[tuple[str, int], ...] = ()  # overrides of the file's chunker options
    hold_llm: bool = False  # diagnostic: no LLM step while the first piece is synthesized
    option: str = ""  # the change, as a user would make it ("" for a pipeline as shipped)
    idle_tts: bool = False  # afterwards, time the engine alone on the turns' first pieces


DEFAULT_SETUP = Setup("default: LocalLlama + Piper", PIPELINE_DEFAULT, idle_tts=True)
ESPEAK_SETUP = Setup(
    "espeak: LocalLlama + espeak-ng",
    PIPELINE_ESPEAK,
    option="the espeak-ng voice (`--pipeline pipelines/local-espeak.toml`)",
    idle_tts=True,
)
# One change each to the default pipeline: what moves its first-audio latency.
ONE_LLM_THREAD_SETUP = Setup(
    "default, LLM on 1 thread",
    PIPELINE_DEFAULT,
    n_threads=1,
    option="`LocalLlama(n_threads=1)` (default: one per CPU)",
)
TWO_WORDS_SETUP = Setup(
    "default, first piece of 2 words",
    PIPELINE_DEFAULT,
    chunker=(("first_chunk_words", 2),),
    option="`[chunker] first_chunk_words = 2` (default 3)",
)
HELD_SETUP = Setup(
    "default, LLM held for the first piece",
    PIPELINE_DEFAULT,
    hold_llm=True,
    option="diagnostic, not an option: no LLM step from the first piece's hand-over to "
    "the TTS engine until its first audio",
)
OPTION_SETUPS = (ONE_LLM_THREAD_SETUP, TWO_WORDS_SETUP, HELD_SETUP)
SETUPS = (DEFAULT_SETUP, ESPEAK_SETUP, *OPTION_SETUPS)


@dataclass(frozen=True, slots=True)
class TurnSample:
    """One turn: its report and what the benchmark's hooks saw of it."""

    prompt: str
    session: int  # which of the setup's sessions (0-based)
    report: LatencyReport
    error: str | None
    first_piece: str | None  # the text of the first piece handed to the TTS engine
    tokens_to_first_piece: int | None  # LLM text deltas up to the one that released it

    @property
    def counted(self) -> bool:
        """Complete, and every figure the benchmark reports is there."""
        if self.report.interrupted or self.error is not None:
            return False
        return all(metric(self.report) is not None for metric in METRICS.values())


@dataclass(slots=True)
class PipelineRun:
    setup: Setup
    llm: str = ""
    tts: str = ""
    n_threads: int = 0
    start_s: float = 0.0  # opening its first session: loading the model and the voice
    warm_up: TurnSample | None = None  # its first session's
    turns: list[TurnSample] = field(default_factory=list)
    idle_tts_ms: list[float] = field(default_factory=list)  # engine alone, per counted turn
    error: str | None = None  # why it did not run

    @property
    def counted(self) -> list[TurnSample]:
        return [turn for turn in self.turns if turn.counted]

    @property
    def excluded(self) -> int:
        return len(self.turns) - len(self.counted)

    def values(self, name: str, session: int | None = None) -> list[float]:
        """The counted turns' values of a figure of ``METRICS`` or ``DERIVED`` (of one
        session's turns if ``session`` is given)."""
        turns = [t for t in self.counted if session is None or t.session == session]
        if name in DERIVED:
            return [v for turn in turns if (v := DERIVED[name](turn)) is not None]
        return [v for turn in turns if (v := METRICS[name](turn.report)) is not None]

    def p50(self, name: str, session: int | None = None) -> float | None:
        values = self.values(name, session)
        return median(values) if values else None

    def p95(self, name: str) -> float | None:
        values = self.values(name)
        return nearest_rank(values, 0.95) if values else None


def _tts_first_byte(report: LatencyReport) -> float | None:
    request, first_byte = report.stamps_ms["tts_request"], report.stamps_ms["tts_first_byte"]
    return None if request is None or first_byte is None else first_byte - request


# Per-turn figures read from the LatencyReport (milliseconds).
METRICS: dict[str, Callable[[LatencyReport], float | None]] = {
    "first_audio": lambda r: r.stamps_ms["first_audio"],
    "first_token": lambda r: r.stamps_ms["first_token"],
    "first_chunk_token": lambda r: r.first_chunk_token_ms,
    "tts_first_byte": _tts_first_byte,
    "pipeline_added": lambda r: r.pipeline_added_ms,
}


def _after_first_token(turn: TurnSample) -> float | None:
    token, first = turn.report.first_chunk_token_ms, turn.report.stamps_ms["first_token"]
    return None if token is None or first is None else token - first


def _ms_per_token(turn: TurnSample) -> float | None:
    between = _after_first_token(turn)
    n = turn.tokens_to_first_piece
    return None if between is None or n is None or n < 2 else between / (n - 1)


def _first_piece_words(turn: TurnSample) -> float | None:
    return None if turn.first_piece is None else float(len(turn.first_piece.split()))


def _tokens(turn: TurnSample) -> float | None:
    n = turn.tokens_to_first_piece
    return None if n is None else float(n)


# Per-turn figures the benchmark derives.
DERIVED: dict[str, Callable[[TurnSample], float | None]] = {
    "after_first_token": _after_first_token,  # first token → the delta that released piece 1
    "ms_per_token": _ms_per_token,  # the LLM's pace over that stretch
    "tokens_to_first_piece": _tokens,
    "first_piece_words": _first_piece_words,
}


@dataclass(frozen=True, slots=True)
class FirstAudioResults:
    runs: list[PipelineRun]  # in SETUPS order
    load_before: float  # 1-minute load average just before the benchmark started
    load_after: float
    seconds: float  # wall time of the whole benchmark
    cpus: int

    def run(self, setup: Setup) -> PipelineRun:
        return next(run for run in self.runs if run.setup == setup)


class Hold:
    """Diagnostic: keeps ``CountingSource`` from asking for the next delta while it is on."""

    def __init__(self) -> None:
        self._released: anyio.Event | None = None  # created in the event loop

    def hold(self) -> None:
        if self._released is None:
            self._released = anyio.Event()

    def release(self) -> None:
        if self._released is not None:
            self._released.set()

    def reset(self) -> None:
        self._released = None

    async def wait(self) -> None:
        if self._released is not None:
            with anyio.move_on_after(HOLD_MAX_S):  # never a deadlock, whatever the engine does
                await self._released.wait()


class CountingSource:
    """Passes an LLM source's deltas through, stamping when each one is handed on.

    ``ReplyStage`` stamps a delta right after receiving it and asks for the next one only
    after passing it on, so the deltas stamped at or before the turn's
    ``first_chunk_token_ns`` are exactly those up to the one that released the first piece.
    With a ``hold``, it waits for the hold to be released before asking for a delta.
    """

    def __init__(self, inner: LlmSource, hold: Hold | None = None) -> None:
        self.inner = inner
        self.hold = hold
        self.name = inner.name
        self.mode: Literal["prefill", "chat"] = inner.mode
        self.arrivals: list[int] = []

    async def start(self) -> None:
        await self.inner.start()

    async def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]:
        self.arrivals = []
        async with aclosing(self.inner.stream(messages)) as deltas:
            while True:
                if self.hold is not None:
                    await self.hold.wait()
                try:
                    delta = await anext(deltas)
                except StopAsyncIteration:
                    return
                self.arrivals.append(time.perf_counter_ns())
                yield delta

    async def aclose(self) -> None:
        await self.inner.aclose()

    def count_until(self, at_ns: int) -> int:
        return bisect.bisect_right(self.arrivals, at_ns)


class _TurnWatch:
    """Session hooks: the running turn's metrics and the first text sent to the engine;
    with a ``hold``, the LLM is held from that hand-over until the first audio."""

    def __init__(self, hold: Hold | None = None) -> None:
        self.hold = hold
        self.metrics: TurnMetrics | None = None
        self.first_piece: str | None = None

    def on_turn_start(self, turn: Turn) -> None:
        self.metrics = turn.metrics
        self.first_piece = None
        if self.hold is not None:
            self.hold.reset()

    def log(self, record: dict[str, Any]) -> None:
        if self.first_piece is None and record.get("event") == "tts_input":
            self.first_piece = str(record["text"])
            if self.hold is not None:
                self.hold.hold()

    def on_piece_start(self, text: str) -> None:
        """Called by the sink stage just before it writes a piece's first audio."""
        if self.hold is not None:
            self.hold.release()


@dataclass(slots=True)
class _Live:
    run: PipelineRun
    index: int  # of the session among the setup's
    session: Session
    source: CountingSource
    watch: _TurnWatch

    async def turn(self, prompt: str) -> TurnSample:
        self.session.history.clear()  # a fresh conversation: short, comparable context
        await anyio.sleep(GAP_S)
        result = await self.session.turn(prompt)
        metrics = self.watch.metrics
        token_ns = None if metrics is None else metrics.first_chunk_token_ns
        return TurnSample(
            prompt=prompt,
            session=self.index,
            report=result.report,
            error=result.error,
            first_piece=self.watch.first_piece,
            tokens_to_first_piece=None if token_ns is None else self.source.count_until(token_ns),
        )


def _session(setup: Setup) -> tuple[Session, CountingSource, _TurnWatch, int]:
    config = load_pipeline(setup.pipeline)
    llm = config.llm
    if llm.spec != "local":
        raise ValueError(f"{setup.pipeline}: [llm] spec is {llm.spec!r}, not 'local'")
    local = LocalLlama(
        llm.model_path,
        n_threads=setup.n_threads,
        max_tokens=MAX_TOKENS,
        temperature=llm.temperature,
        seed=SEED,
        system_prompt=llm.system_prompt,
    )
    hold = Hold() if setup.hold_llm else None
    source = CountingSource(local, hold)
    watch = _TurnWatch(hold)
    session = Session(
        source,
        create_engine(config.tts.spec),
        # Not real time: a real-time one would make each turn last as long as its audio
        # (~10 s), and change nothing before the first audio but the 0-10 ms wait for
        # its clock's next block (see docs/metrics.md).
        NullSink(sample_rate=SINK_RATE),
        chunker_options={**config.chunker.model_dump(), **dict(setup.chunker)},
        log=watch.log,
        on_piece_start=watch.on_piece_start,
        on_turn_start=watch.on_turn_start,
    )
    return session, source, watch, local.n_threads


async def _open(stack: AsyncExitStack, run: PipelineRun, index: int) -> _Live | None:
    """Open a session for ``run``'s setup; None (and ``run.error`` set) if it cannot start."""
    try:
        session, source, watch, run.n_threads = _session(run.setup)
        started = time.perf_counter()
        await stack.enter_async_context(session)
    except (ValueError, LlmError, TtsError, SinkError) as error:
        run.error = f"{type(error).__name__}: {error}"
        return None
    if index == 0:
        run.start_s = time.perf_counter() - started
        run.llm, run.tts = session.membrane.provider.name, session.engine.name
    return _Live(run, index, session, source, watch)


async def _idle_first_byte(engine: TtsEngine, text: str) -> float | None:
    """The engine's time to the first audio of ``text``, speaking on its own."""
    await anyio.sleep(IDLE_GAP_S)
    started = time.perf_counter_ns()
    async with aclosing(engine.synthesize(text)) as audio:
        async for _ in audio:
            return (time.perf_counter_ns() - started) / 1e6
    return None


async def _bench(run: PipelineRun, index: int, prompts: Sequence[str]) -> None:
    """One session of ``run``'s setup: open it, warm it up, then each prompt in turn."""
    async with AsyncExitStack() as stack:
        live = await _open(stack, run, index)
        if live is None:
            return
        warm_up = await live.turn(WARM_UP_PROMPT)
        if index == 0:
            run.warm_up = warm_up
        turns = [await live.turn(prompt) for prompt in prompts]
        run.turns += turns
        for turn in turns if run.setup.idle_tts else []:
            if turn.counted:
                assert turn.first_piece is not None  # counted: it has a TTS request
                ms = await _idle_first_byte(live.session.engine, turn.first_piece)
                if ms is not None:
                    run.idle_tts_ms.append(ms)


def run_first_audio_bench(setups: Sequence[Setup] = SETUPS) -> FirstAudioResults:
    """Run every setup; ``ImportError`` when llama.cpp or Piper is not installed."""
    for module in REQUIRED_MODULES:
        if importlib.util.find_spec(module) is None:
            raise ImportError(f"No module named {module!r}")
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    # One session at a time, each in its own event loop, has the process's CPUs to itself
    # as `voice-membrane run` does. (Sessions taking turns within one loop would share
    # anyio's worker threads, and a Piper session's threads slow the others' LLM.)
    runs = [PipelineRun(setup) for setup in setups]
    for index in range(SESSIONS):
        prompts = PROMPTS[index::SESSIONS]
        for run in runs if index % 2 == 0 else runs[::-1]:
            if run.error is None:
                anyio.run(_bench, run, index, prompts)
    return FirstAudioResults(
        runs=runs,
        load_before=load_before,
        load_after=os.getloadavg()[0],
        seconds=time.perf_counter() - started,
        cpus=os.cpu_count() or 1,
    )

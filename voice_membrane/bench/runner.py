"""Run the turns of one benchmark target and keep what each turn measured
(docs/bench.md has the method): its sessions (engines started once per session,
as ``run`` and ``serve`` do), their warm-up turns, the TTS first byte *measured
alone* once every session is warm, then the counted turns shared out between
the sessions, each a fresh conversation (the same short context every turn).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import anyio

from ..infra.heap import settle_heap
from ..infra.redact import redact
from ..membrane.tools_mcp import McpServerError
from ..pipeline.build import build_parts, session_for
from ..pipeline.config import ConfigError, PipelineConfig
from ..pipeline.metrics import STAMPS, LatencyReport
from ..pipeline.turn import Turn
from ..sinks.base import SinkError
from ..tts.base import TtsEngine, TtsError
from ..vendors.errors import LlmError
from .stats import summarize

GAP_S = 0.15  # before each turn, as a user pauses; lets the last turn's threads go idle
ALONE_REPEATS = 3  # syntheses of the first piece with the engine alone; their median is used
ALONE_GAP_S = 0.05  # before each: lets the turn's last work settle
STARTUP_ERRORS = (ConfigError, LlmError, TtsError, SinkError, McpServerError, OSError)
# Stamps shown in the table (request_sent is 0 by definition).
STAMP_ROWS = STAMPS[1:]


@dataclass(frozen=True, slots=True)
class Target:
    """One pipeline to measure. ``llm_after_first_token_ms``: in scripted mode,
    how long after the first token the delta that completes the first piece is
    due by the script's pace (else the turn's own ``first_chunk_token`` stands
    for both). ``url``: a running ``serve`` endpoint
    measured as its client (``remote.py``; ``config`` is None), ``server_pipeline``
    the name of the server's pipeline to ask for (None: the server's default)."""

    label: str
    config: PipelineConfig | None
    llm_after_first_token_ms: float | None = None
    url: str | None = None
    server_pipeline: str | None = None


@dataclass(frozen=True, slots=True)
class TurnSample:
    prompt: str
    session: int  # which of the target's sessions (0-based)
    warm_up: bool
    report: LatencyReport | None  # None: the turn raised before it could report
    error: str | None
    # With --url: from sending user.message to the turn's first audio frame (client clock).
    client_first_audio_ms: float | None = None
    first_piece: str | None = None  # the first text handed to the TTS engine (not with --url)
    # That piece spoken again by the engine alone, after the turns (``alone_each_turn``).
    tts_alone_ms: float | None = None

    @property
    def client_minus_server_ms(self) -> float | None:
        """What the network and framing added to the server's own first audio."""
        client = self.client_first_audio_ms
        server = None if self.report is None else self.report.first_audio_ms
        return None if client is None or server is None else round(client - server, 3)

    @property
    def counted(self) -> bool:
        """A complete counted turn with every stamp the ideal needs."""
        report = self.report
        if self.warm_up or self.error is not None or report is None or report.interrupted:
            return False
        return report.first_audio_ms is not None and report.pipeline_added_ms is not None


@dataclass(slots=True)
class TargetRun:
    target: Target
    llm: str = ""
    tts: str = ""
    sessions: int = 0
    turns: list[TurnSample] = field(default_factory=list)  # counted phase, in finishing order
    warm_ups: list[TurnSample] = field(default_factory=list)
    tts_alone_ms: list[float] = field(default_factory=list)
    error: str | None = None  # why the target was not measured
    open_s: float | None = None  # opening its sessions: starting the engines, loading models
    interrupted: bool = False  # Ctrl-C stopped it: ``turns`` are those finished before

    @property
    def counted(self) -> list[TurnSample]:
        return [turn for turn in self.turns if turn.counted]

    @property
    def errors(self) -> int:
        return sum(1 for turn in self.turns if turn.error is not None)

    @property
    def cut_off(self) -> int:
        """Turns the LLM's token limit cut (``stop_reason`` max_tokens): counted,
        but their answers were not whole."""
        return sum(1 for turn in self.turns if turn.report is not None and turn.report.cut_off)

    @property
    def excluded(self) -> int:
        """Turns without an error that still cannot be counted (interrupted, or no
        audio or no visible text: a stamp the figures need is missing)."""
        return len(self.turns) - len(self.counted) - self.errors

    def gaps(self) -> dict[str, float]:
        """Where real-time playback would have run dry (``LatencyReport.audio_gaps``)
        over the counted phase's turns: the turns with a gap, the gaps, their ms."""
        reports = [turn.report for turn in self.turns if turn.report is not None]
        return {
            "turns": sum(1 for report in reports if report.audio_gaps),
            "gaps": sum(report.audio_gaps for report in reports),
            "ms": round(sum(report.audio_gap_ms for report in reports), 3),
        }

    @property
    def tts_alone(self) -> float | None:
        return statistics.median(self.tts_alone_ms) if self.tts_alone_ms else None

    def alone_ms(self, turn: TurnSample) -> float | None:
        """The engine's time alone for ``turn``: its own first piece's if that was
        timed (``alone_each_turn``), else the target's median."""
        return turn.tts_alone_ms if turn.tts_alone_ms is not None else self.tts_alone

    def ideal_ms(self, turn: TurnSample) -> float | None:
        """The earliest first audio this turn allowed: the LLM's first token, plus
        the deltas up to the one that completed the first piece at the token pace,
        plus the TTS first byte measured alone."""
        report, alone = turn.report, self.alone_ms(turn)
        if report is None or alone is None:
            return None
        after = self.target.llm_after_first_token_ms
        if after is None:
            llm = report.first_chunk_token_ms
        else:
            first_token = report.stamps_ms["first_token"]
            llm = None if first_token is None else first_token + after
        return None if llm is None else round(llm + alone, 3)

    def excess_ms(self, turn: TurnSample) -> float | None:
        ideal = self.ideal_ms(turn)
        first_audio = None if turn.report is None else turn.report.first_audio_ms
        return None if ideal is None or first_audio is None else round(first_audio - ideal, 3)

    def figures(self, turn: TurnSample) -> dict[str, float | None]:
        """Every figure of one turn, in the table's order (milliseconds)."""
        report = turn.report
        assert report is not None
        stamps = report.stamps_ms
        figures: dict[str, float | None] = {name: stamps[name] for name in STAMP_ROWS}
        request, first_byte = stamps["tts_request"], stamps["tts_first_byte"]
        figures["llm_share"] = report.first_chunk_token_ms
        figures["tts_ttfb"] = (
            None if request is None or first_byte is None else round(first_byte - request, 3)
        )
        figures["pipeline_added"] = report.pipeline_added_ms
        figures["tts_alone"] = self.alone_ms(turn)
        figures["ideal"] = self.ideal_ms(turn)
        figures["excess"] = self.excess_ms(turn)
        figures["llm_held"] = report.llm_held_ms  # None: first-audio priority was off
        if self.target.url is not None:
            figures["client_first_audio"] = turn.client_first_audio_ms
            figures["client_minus_server"] = turn.client_minus_server_ms
        return figures

    def summary(self) -> dict[str, Any]:
        """Percentiles of every figure over the counted turns, and the counts."""
        counted = self.counted
        rows: dict[str, list[float]] = {}
        for turn in counted:
            for name, value in self.figures(turn).items():
                if value is not None:
                    rows.setdefault(name, []).append(value)
        return {
            "label": self.target.label,
            "llm": self.llm,
            "tts": self.tts,
            "sessions": self.sessions,
            "error": self.error,
            "interrupted": self.interrupted,
            "turns": len(self.turns),
            "counted": len(counted),
            "errors": self.errors,
            "excluded": self.excluded,
            "cut_off": self.cut_off,
            "tts_alone_ms": [round(ms, 3) for ms in self.tts_alone_ms],
            "open_s": None if self.open_s is None else round(self.open_s, 3),
            "gaps": self.gaps(),
            "figures_ms": {name: summarize(values) for name, values in rows.items()},
        }


OnTurn = Callable[[TargetRun, TurnSample], None]


class Client(Protocol):
    async def turn(self, prompt: str, warm_up: bool) -> TurnSample: ...


@dataclass(slots=True)
class Schedule:
    """Which turns a target's sessions run: ``warmup`` each; then, once every
    session is warm and ``between`` has run (on session 0, nothing else running),
    ``turns`` counted: turn i asks ``prompts[i % len(prompts)]`` on session
    ``i % concurrency``."""

    prompts: Sequence[str]
    turns: int
    warmup: int
    concurrency: int
    warm_up_prompt: str
    on_turn: OnTurn
    between: Callable[[], Awaitable[None]] | None = None
    _cold: int = field(init=False)
    _warm: anyio.Event = field(init=False, default_factory=anyio.Event)
    _ready: anyio.Event = field(init=False, default_factory=anyio.Event)

    def __post_init__(self) -> None:
        self._cold = self.concurrency

    async def play(
        self, run: TargetRun, client: Client, index: int, timeout_s: float | None = None
    ) -> None:
        """Session ``index``'s turns, into ``run``."""
        for k in range(self.warmup):
            # The first warm-up turn asks its own prompt, later ones the prompts in order.
            prompt = self.warm_up_prompt if k == 0 else self.prompts[(k - 1) % len(self.prompts)]
            with anyio.fail_after(timeout_s):
                run.warm_ups.append(await client.turn(prompt, True))
        self._cold -= 1
        if self._cold <= 0:
            self._warm.set()
        if index == 0:
            await self._warm.wait()
            if self.between is not None:
                await self.between()
            self._ready.set()
        await self._ready.wait()
        for i in range(index, self.turns, self.concurrency):
            with anyio.fail_after(timeout_s):
                sample = await client.turn(self.prompts[i % len(self.prompts)], False)
            run.turns.append(sample)
            self.on_turn(run, sample)


class _Live:
    """One session of a target in this process, and the first text each of its
    turns hands to the TTS engine."""

    def __init__(self, config: PipelineConfig | None, index: int) -> None:
        assert config is not None, "a --url target runs in remote.py"
        self.index = index
        self.first_piece: str | None = None
        parts = build_parts(config)
        self.session = session_for(config, parts, log=self._log, on_turn_start=self._started)

    def _started(self, turn: Turn) -> None:
        self.first_piece = None

    def _log(self, record: dict[str, Any]) -> None:
        if self.first_piece is None and record.get("event") == "tts_input":
            self.first_piece = str(record["text"])

    async def turn(self, prompt: str, warm_up: bool) -> TurnSample:
        self.session.history.clear()  # a fresh conversation: short, comparable context
        self.session.first_kept = 0
        await anyio.sleep(GAP_S)
        try:
            result = await self.session.turn(prompt)
        except (LlmError, TtsError, SinkError) as exc:
            return TurnSample(prompt, self.index, warm_up, None, redact(str(exc)))
        error = redact(result.error) if result.error else None
        return TurnSample(
            prompt, self.index, warm_up, result.report, error, first_piece=self.first_piece
        )


async def tts_alone_ms(engine: TtsEngine, text: str) -> float | None:
    """The engine's time from the hand-over of ``text`` to its first audio, with
    nothing else running; leaving the stream then stops the rest of the piece."""
    async with engine.open_stream() as stream, anyio.create_task_group() as tg:

        async def push() -> None:
            await stream.push(text)
            await stream.end_input()

        started = time.perf_counter_ns()
        tg.start_soon(push)
        async for _ in stream:
            tg.cancel_scope.cancel()
            return (time.perf_counter_ns() - started) / 1e6
    return None


async def run_target(
    target: Target,
    prompts: Sequence[str],
    *,
    turns: int,
    warmup: int,
    concurrency: int,
    warm_up_prompt: str,
    on_turn: OnTurn = lambda run, turn: None,
    alone_each_turn: bool = False,
) -> TargetRun:
    """``turns`` counted turns of ``target`` over ``concurrency`` sessions at once,
    after ``warmup`` turns per session (``Schedule``). A target that cannot start
    (a missing key, a model that will not load) is returned with ``error`` set.
    ``alone_each_turn``: once every turn is done, the first session's engine
    speaks each counted turn's own first piece alone, for that turn's ideal (a
    local engine's time depends on the piece; a cloud one would bill it again)."""
    run = TargetRun(target, sessions=concurrency)
    async with AsyncExitStack() as stack:
        started = time.perf_counter()
        try:
            lives = [_Live(target.config, i) for i in range(concurrency)]
            for live in lives:
                await stack.enter_async_context(live.session)
        except STARTUP_ERRORS as exc:
            run.error = one_line(exc)
            return run
        run.open_s = time.perf_counter() - started
        engine = lives[0].session.engine
        run.llm, run.tts = lives[0].session.membrane.provider.name, engine.name
        settle_heap()  # the engines are loaded: keep them out of every full collection

        async def alone() -> None:
            """The first piece of session 0's last warm-up turn, spoken by its engine alone."""
            piece = lives[0].first_piece
            if not piece:
                return
            for _ in range(ALONE_REPEATS):
                await anyio.sleep(ALONE_GAP_S)
                ms = await tts_alone_ms(engine, piece)
                if ms is not None:
                    run.tts_alone_ms.append(ms)

        schedule = Schedule(prompts, turns, warmup, concurrency, warm_up_prompt, on_turn, alone)
        async with anyio.create_task_group() as tg:
            for live in lives:
                tg.start_soon(schedule.play, run, live, live.index)
        if alone_each_turn:
            run.turns = [await _alone(engine, turn) for turn in run.turns]
    return run


async def _alone(engine: TtsEngine, turn: TurnSample) -> TurnSample:
    """``turn`` with its first piece's time spoken by ``engine`` alone."""
    if not turn.counted or turn.first_piece is None:
        return turn
    await anyio.sleep(ALONE_GAP_S)
    return replace(turn, tts_alone_ms=await tts_alone_ms(engine, turn.first_piece))


def merge_runs(runs: Sequence[TargetRun]) -> TargetRun:
    """Runs of one target made one after another, as one run: each run's sessions
    numbered on from the run before (its turns follow), the engine-alone timings
    of all, the first run's opening time and the first error."""
    merged = TargetRun(runs[0].target)
    for run in runs:
        offset = merged.sessions
        merged.turns += [replace(turn, session=turn.session + offset) for turn in run.turns]
        merged.warm_ups += [replace(turn, session=turn.session + offset) for turn in run.warm_ups]
        merged.tts_alone_ms += run.tts_alone_ms
        merged.sessions += run.sessions
        merged.llm = merged.llm or run.llm
        merged.tts = merged.tts or run.tts
        merged.error = merged.error or run.error
        if merged.open_s is None:
            merged.open_s = run.open_s
    return merged


def one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    else:
        text = str(exc) or type(exc).__name__
    return redact(" ".join(text.split()))

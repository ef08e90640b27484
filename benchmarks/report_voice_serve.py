"""The voice-over-the-endpoint section of the benchmark report
(``benchmarks.bench_voice_serve``): the figures and the setup they were
measured with; its words are ``sections/voice-serve.md``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from benchmarks.prose import prose, title
from benchmarks.table import Column, Table, quoted
from voice_membrane.bench.stats import Spread, nearest_rank
from voice_membrane.bench.voice_serve import VoiceServeResults, workers_note
from voice_membrane.bench.voice_serve_figures import CallLevel, error_kinds, figure, spread

VOICE_SERVE_TITLE = title("voice-serve")
TARGET_ADDED_MS = 20.0
TARGET_CALLERS = (1, 50)
TARGET_BARGE_P95_MS = 150.0
SPREAD = Spread(("p50", "p95", "max"))
SIGNED = Spread(("p50", "p95", "max"), signed=True)
# The stage table's columns: header, figure, signed (a figure over its floor).
STAGES = (
    ("detector", "detector_dating", True),
    ("endpointing", "server_endpointing", True),
    ("STT final", "server_final", False),
    ("decided → request", "server_request", True),
    ("request → first audio", "server_first_audio", True),
    ("of it: LLM first token", "llm_first_token", True),
    ("first piece", "first_piece", True),
    ("TTS first byte", "tts_first_byte", True),
    ("TTS → sink", "to_the_sink", False),
    ("server added", "server_added", True),
    ("client - server", "client_minus_server", True),
)


def _who(level: CallLevel) -> str:
    route = "/v1/twilio" if level.route == "twilio" else "/v1/session"
    return f"{level.callers}, {route}{workers_note(level.workers)}"


def _errors(level: CallLevel) -> str:
    kinds = error_kinds(level)
    if not kinds:
        return "0"
    listed = ", ".join(f"{quoted(k)} {n}" for k, n in kinds.most_common(4))
    return f"{sum(kinds.values())} ({listed})"


def _cpu(level: CallLevel) -> str:
    return f"{level.server_cpu_cores:.2f} ({level.cpu_ms_per_call_s:.1f} ms)"


def _client(level: CallLevel) -> str:
    lag_p99 = nearest_rank(level.client_lag_ms, 0.99) if level.client_lag_ms else 0.0
    return f"{lag_p99:.0f} / {max(level.send_late_ms, default=0.0):.0f}"


def _rss_kib(level: CallLevel) -> str:
    kib = max(0.0, level.server_rss_peak_mb - level.server_rss_base_mb) * 1024 / level.callers
    return f"{kib:.0f} KiB"


def _actions(level: CallLevel) -> str:
    actions = Counter(" → ".join(t.barge_in) for t in level.turns if t.barge_in)
    return ", ".join(f"{quoted(k)} {n}" for k, n in actions.most_common(3)) or "—"


def _tables(
    results: VoiceServeResults,
) -> tuple[Table[CallLevel], Table[CallLevel], Table[CallLevel]]:
    """The calls', the stages' and the barge-ins' tables."""

    def samples(name: str) -> Callable[[CallLevel], list[float]]:
        # To 0.1 ms, as the results' summary (``spread``) has them.
        return lambda lv: [round(v, 1) for v in figure(lv, results.engines, name)]

    def fig(name: str, spread: Spread = SPREAD) -> Callable[[CallLevel], str]:
        return lambda lv: spread.cell(samples(name)(lv))

    who = Column("Callers, route", _who)
    calls = [
        who,
        Column("answered / asked", lambda lv: f"{len(lv.answered())} / {len(lv.turns)}"),
        Column("voice to voice", samples("voice_to_voice"), SPREAD),
        Column("added", fig("added", SIGNED)),
        Column("errors", _errors),
        Column("server CPU, cores (per call-second)", _cpu),
        Column("RSS per caller", _rss_kib),
        Column("client lag / send late", _client),
        Column(
            "client / fakes CPU",
            lambda lv: f"{lv.client_cpu_cores:.2f} ({lv.clients}) / {lv.fakes_cpu_cores:.2f}",
        ),
    ]
    wall: Column[CallLevel] = Column("calls' wall time", lambda lv: f"{lv.seconds:.0f} s")
    stages = [who, *(Column(h, fig(n, SIGNED if s else SPREAD)) for h, n, s in STAGES), wall]
    barge = [
        who,
        Column(
            "barged / asked",
            lambda lv: f"{len(figure(lv, results.engines, 'barge_in'))} / {len(lv.turns)}",
        ),
        Column("onset → barge_in", samples("barge_in"), SPREAD),
        Column("actions", _actions),
        Column("errors", _errors),
        Column("server CPU, cores (per call-second)", _cpu),
    ]
    return Table(calls), Table(stages), Table(barge)


def _p(level: CallLevel, results: VoiceServeResults, name: str, point: str) -> float:
    """A figure's order statistic as the results' summary has it (∞ for none)."""
    values = spread(figure(level, results.engines, name))
    return values[point] if values else float("inf")


def _verdict(results: VoiceServeResults) -> str:
    parts = []
    missed = False
    routes = sorted({lv.route for lv in results.levels}, reverse=True) or ["session"]
    for route, callers in ((r, n) for r in routes for n in TARGET_CALLERS):
        levels = [lv for lv in results.levels if lv.callers == callers and lv.route == route]
        if not levels:
            parts.append(f"{callers} on {route}: not run")
            missed = True
        met = False
        for level in levels:  # one per worker count measured
            p50 = _p(level, results, "added", "p50")
            unanswered = len(level.turns) - len(level.answered())
            met |= p50 <= TARGET_ADDED_MS and not unanswered and not level.errors
            note = f", {unanswered} questions unanswered" if unanswered else ""
            parts.append(f"{_who(level)}: added p50 {p50:+.0f} ms{note}")
        missed |= not met
    verdict = "missed" if missed else "met"
    return prose(
        "voice-serve#verdict", target_ms=TARGET_ADDED_MS, verdict=verdict, parts="; ".join(parts)
    )


def _barge_part(results: VoiceServeResults, barge: Table[CallLevel]) -> str:
    if not results.barge:
        return ""
    parts = []
    missed = False
    for level in results.barge:
        p95 = _p(level, results, "barge_in", "p95")
        failed = len(level.turns) - len(level.answered())
        missed |= p95 > TARGET_BARGE_P95_MS or failed > 0
        note = f", {failed} questions with errors" if failed else ""
        parts.append(f"{_who(level)}: p95 {p95:.0f} ms{note}")
    setup = results.setup
    return prose(
        "voice-serve#barge",
        interruption=(setup.interrupt or "").rsplit("/", 1)[-1],
        after_s=setup.plan.interrupt_after_s,
        turns=setup.barge_turns,
        table=barge.render(results.barge),
        target_ms=TARGET_BARGE_P95_MS,
        verdict="missed" if missed else "met",
        parts="; ".join(parts),
    )


def voice_serve_section(results: VoiceServeResults) -> str:
    setup, engines = results.setup, results.engines
    plan, reply = setup.plan, setup.reply
    calls, stages, barge = _tables(results)
    left = [f"{n} of {_who(lv)}" for lv in results.levels if (n := lv.unmatched)]
    return prose(
        "voice-serve",
        finalize_ms=setup.finalize_s * 1000,
        ttft_ms=reply.llm_ttft_s * 1000,
        delta_chars=reply.delta_chars,
        token_ms=reply.token_s * 1000,
        ttfb_ms=reply.tts_ttfb_s * 1000,
        end_silence_s=setup.end_silence_s,
        end_silence_ms=setup.end_silence_s * 1000,
        callers_per_client=setup.callers_per_client,
        sample_rate=plan.sample_rate,
        frame_ms=plan.frame_ms,
        question=quoted(setup.question_text),
        question_file=setup.question.rsplit("/", 1)[-1],
        ramp_s=plan.ramp_s,
        more_turns=plan.turns - 1,
        think_s=plan.think_s,
        output_frame_ms=plan.output_frame_ms,
        final_ms=engines.final_ms,
        min_silence_ms=engines.final_ms - setup.finalize_s * 1000,
        more_deltas=engines.deltas - 1,
        first_piece=quoted(engines.first_piece),
        total_ms=engines.total_ms,
        reply_ms=engines.reply_ms,
        llm_ttft_ms=engines.llm_ttft_ms,
        deltas_ms=engines.deltas_ms,
        tts_ttfb_ms=engines.tts_ttfb_ms,
        table=calls.render(results.levels),
        verdict=_verdict(results),
        unmatched=" " + prose("voice-serve#unmatched", left=", ".join(left)) if left else "",
        stages=stages.render(results.levels),
        barge=_barge_part(results, barge),
        load_before=results.load_before,
        load_after=results.load_after,
        seconds=results.seconds,
    )

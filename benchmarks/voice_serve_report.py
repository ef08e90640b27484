"""The voice-over-the-endpoint section of the benchmark report
(``benchmarks.voice_serve``); its words are ``sections/voice-serve.md``."""

from __future__ import annotations

from collections import Counter

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
# The stage table's columns (header: figure); all but two are over a floor, signed.
STAGES = {
    "detector": "detector_dating",
    "endpointing": "server_endpointing",
    "STT final": "server_final",
    "decided → request": "server_request",
    "request → first audio": "server_first_audio",
    "of it: LLM first token": "llm_first_token",
    "first piece": "first_piece",
    "TTS first byte": "tts_first_byte",
    "TTS → sink": "to_the_sink",
    "server added": "server_added",
    "client - server": "client_minus_server",
}
UNSIGNED = {"server_final", "to_the_sink"}


def _who(level: CallLevel) -> str:
    route = "/v1/twilio" if level.route == "twilio" else "/v1/session"
    return f"{level.callers}, {route}{workers_note(level.workers)}"


def _errors(level: CallLevel) -> str:
    kinds = error_kinds(level)
    listed = ", ".join(f"{quoted(k)} {n}" for k, n in kinds.most_common(4))
    return f"{sum(kinds.values())} ({listed})" if kinds else "0"


def _client_lag(level: CallLevel) -> str:
    lag = nearest_rank(level.client_lag_ms, 0.99) if level.client_lag_ms else 0.0
    return f"{lag:.0f} / {max(level.send_late_ms, default=0.0):.0f}"


def _actions(level: CallLevel) -> str:
    actions = Counter(" → ".join(t.barge_in) for t in level.turns if t.barge_in)
    return ", ".join(f"{quoted(k)} {n}" for k, n in actions.most_common(3)) or "—"


def _tables(results: VoiceServeResults) -> tuple[Table[CallLevel], ...]:
    """The calls', the stages' and the barge-ins' tables."""

    def samples(level: CallLevel, name: str) -> list[float]:
        # To 0.1 ms first, as the results' summary (``spread``) has them.
        return [round(v, 1) for v in figure(level, results.engines, name)]

    def fig(header: str, name: str, spread: Spread = SIGNED) -> Column[CallLevel]:
        return Column(header, lambda lv: spread.cell(samples(lv, name)))

    def rss(lv: CallLevel) -> float:
        return max(0.0, lv.server_rss_peak_mb - lv.server_rss_base_mb) * 1024 / lv.callers

    who: Column[CallLevel] = Column("Callers, route", _who)
    cpu: Column[CallLevel] = Column(
        "server CPU, cores (per call-second)",
        lambda lv: f"{lv.server_cpu_cores:.2f} ({lv.cpu_ms_per_call_s:.1f} ms)",
    )
    calls = [
        who,
        Column("answered / asked", lambda lv: f"{len(lv.answered())} / {len(lv.turns)}"),
        Column("voice to voice", lambda lv: samples(lv, "voice_to_voice"), SPREAD),
        fig("added", "added"),
        Column("errors", _errors),
        cpu,
        Column("RSS per caller", lambda lv: f"{rss(lv):.0f} KiB"),
        Column("client lag / send late", _client_lag),
        Column(
            "client / fakes CPU",
            lambda lv: f"{lv.client_cpu_cores:.2f} ({lv.clients}) / {lv.fakes_cpu_cores:.2f}",
        ),
    ]
    stages = [
        who,
        *(fig(h, n, SPREAD if n in UNSIGNED else SIGNED) for h, n in STAGES.items()),
        Column("calls' wall time", lambda lv: f"{lv.seconds:.0f} s"),
    ]
    barge = [
        who,
        Column(
            "barged / asked",
            lambda lv: f"{len(figure(lv, results.engines, 'barge_in'))} / {len(lv.turns)}",
        ),
        Column("onset → barge_in", lambda lv: samples(lv, "barge_in"), SPREAD),
        Column("actions", _actions),
        Column("errors", _errors),
        cpu,
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
    return prose(
        "voice-serve#barge",
        setup=results.setup,
        interruption=(results.setup.interrupt or "").rsplit("/", 1)[-1],
        table=barge.render(results.barge),
        target_ms=TARGET_BARGE_P95_MS,
        verdict="missed" if missed else "met",
        parts="; ".join(parts),
    )


def voice_serve_section(results: VoiceServeResults) -> str:
    setup, engines, reply = results.setup, results.engines, results.setup.reply
    calls, stages, barge = _tables(results)
    left = [f"{n} of {_who(lv)}" for lv in results.levels if (n := lv.unmatched)]
    return prose(
        "voice-serve",
        results=results,
        setup=setup,
        plan=setup.plan,
        reply=reply,
        engines=engines,
        finalize_ms=setup.finalize_s * 1000,
        ttft_ms=reply.llm_ttft_s * 1000,
        token_ms=reply.token_s * 1000,
        ttfb_ms=reply.tts_ttfb_s * 1000,
        end_silence_ms=setup.end_silence_s * 1000,
        question=quoted(setup.question_text),
        question_file=setup.question.rsplit("/", 1)[-1],
        more_turns=setup.plan.turns - 1,
        min_silence_ms=engines.final_ms - setup.finalize_s * 1000,
        more_deltas=engines.deltas - 1,
        first_piece=quoted(engines.first_piece),
        table=calls.render(results.levels),
        verdict=_verdict(results),
        unmatched=" " + prose("voice-serve#unmatched", left=", ".join(left)) if left else "",
        stages=stages.render(results.levels),
        barge=_barge_part(results, barge),
    )

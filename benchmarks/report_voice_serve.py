"""The voice-over-the-endpoint section of the benchmark report
(``benchmarks.bench_voice_serve``): the figures and the setup they were
measured with."""

from __future__ import annotations

from collections import Counter

from benchmarks.table import quoted, table
from voice_membrane.bench.stats import nearest_rank
from voice_membrane.bench.voice_serve import VoiceServeResults, workers_note
from voice_membrane.bench.voice_serve_figures import CallLevel, error_kinds, figure, spread

VOICE_SERVE_TITLE = "Voice to voice over the endpoint (`serve`, protocol 1.2)"
TARGET_ADDED_MS = 20.0
TARGET_CALLERS = (1, 50)
TARGET_BARGE_P95_MS = 150.0


def _spread(level: CallLevel, results: VoiceServeResults, name: str, signed: bool = False) -> str:
    values = spread(figure(level, results.engines, name))
    if values is None:
        return "—"
    sign = "+" if signed else ""
    return " / ".join(f"{values[q]:{sign}.0f}" for q in ("p50", "p95", "max"))


def _who(level: CallLevel) -> str:
    route = "/v1/twilio" if level.route == "twilio" else "/v1/session"
    return f"{level.callers}, {route}{workers_note(level.workers)}"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _rss_kib(level: CallLevel) -> float:
    return max(0.0, level.server_rss_peak_mb - level.server_rss_base_mb) * 1024 / level.callers


def _errors(level: CallLevel) -> str:
    kinds = error_kinds(level)
    if not kinds:
        return "0"
    listed = ", ".join(f"{quoted(k)} {n}" for k, n in kinds.most_common(4))
    return f"{sum(kinds.values())} ({listed})"


def _unmatched_note(results: VoiceServeResults) -> str:
    left = [f"{n} of {_who(lv)}" for lv in results.levels if (n := lv.unmatched)]
    if not left:
        return ""
    return f" Turns the log did not match (their server figures left out): {', '.join(left)}."


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
            added = spread(figure(level, results.engines, "added"))
            p50 = added["p50"] if added else float("inf")
            unanswered = len(level.turns) - len(level.answered())
            met |= p50 <= TARGET_ADDED_MS and not unanswered and not level.errors
            note = f", {unanswered} questions unanswered" if unanswered else ""
            parts.append(f"{_who(level)}: added p50 {p50:+.0f} ms{note}")
        missed |= not met
    target = (
        f"Target (our code adds ≤ {TARGET_ADDED_MS:.0f} ms p50 over the engines' own times, "
        "at 1 and at 50 concurrent callers, on this 2-core machine; met by a size when one "
        "of the worker counts measured meets it)"
    )
    return f"{target}: **{'missed' if missed else 'met'}** — {'; '.join(parts)}."


def _barge_rows(results: VoiceServeResults) -> list[list[object]]:
    rows: list[list[object]] = []
    for level in results.barge:
        actions = Counter(" → ".join(t.barge_in) for t in level.turns if t.barge_in)
        rows.append(
            [
                _who(level),
                f"{len(figure(level, results.engines, 'barge_in'))} / {len(level.turns)}",
                _spread(level, results, "barge_in"),
                ", ".join(f"{quoted(k)} {n}" for k, n in actions.most_common(3)) or "—",
                _errors(level),
                f"{level.server_cpu_cores:.2f} ({level.cpu_ms_per_call_s:.1f} ms)",
            ]
        )
    return rows


def _barge_verdict(results: VoiceServeResults) -> str:
    parts = []
    missed = False
    for level in results.barge:
        values = spread(figure(level, results.engines, "barge_in"))
        p95 = values["p95"] if values else float("inf")
        failed = len(level.turns) - len(level.answered())
        missed |= p95 > TARGET_BARGE_P95_MS or failed > 0
        note = f", {failed} questions with errors" if failed else ""
        parts.append(f"{_who(level)}: p95 {p95:.0f} ms{note}")
    return (
        f"Target (barge-in: the caller's speech onset → the reply stopped ≤ "
        f"{TARGET_BARGE_P95_MS:.0f} ms p95: a phone call's `clear`, a /v1/session "
        f"client's `barge_in` `pause`): **{'missed' if missed else 'met'}** — {'; '.join(parts)}."
    )


def _barge_part(results: VoiceServeResults) -> list[str]:
    if not results.barge:
        return []
    setup = results.setup
    name = (setup.interrupt or "").rsplit("/", 1)[-1]
    note = (
        f"**Barge-in.** The same callers, each saying `{name}` "
        f"{setup.plan.interrupt_after_s:g} s after every answer's first audio — past the "
        "endpointer's 3 s echo warm-up, in which speech alone does not pause a reply (words "
        f"do) — then waiting for the answer to that, {setup.barge_turns} questions each; "
        "*onset → barge_in*: the arrival of the phone call's `clear` (of a /v1/session "
        "client's first `barge_in` event, `pause`) - the capture of the interruption's first "
        "voiced sample (the start of its first 4 ms block above -50 dBFS, the detector's "
        "loudness gate, on the detector's own blocks; dated as a microphone captures it: "
        "its frame's send less the rest of the frame). *Actions*: "
        "what each answer got. On /v1/twilio the fake Twilio caller (`testing.fake_twilio`) "
        "sends 20 ms μ-law 8 kHz `media` in real time and echoes marks once played; Twilio "
        "carries no events, so its rows have the client's figures only."
    )
    return [
        note,
        table(
            [
                "Callers, route",
                "barged / asked",
                "onset → barge_in p50 / p95 / max",
                "actions",
                "errors",
                "server CPU, cores (per call-second)",
            ],
            _barge_rows(results),
        ),
        _barge_verdict(results),
    ]


def voice_serve_section(results: VoiceServeResults) -> str:
    setup, engines = results.setup, results.engines
    plan, reply = setup.plan, setup.reply
    rows = []
    for level in results.levels:
        lag_p99 = nearest_rank(level.client_lag_ms, 0.99) if level.client_lag_ms else 0.0
        late = max(level.send_late_ms, default=0.0)
        rows.append(
            [
                _who(level),
                f"{len(level.answered())} / {len(level.turns)}",
                _spread(level, results, "voice_to_voice"),
                _spread(level, results, "added", signed=True),
                _errors(level),
                f"{level.server_cpu_cores:.2f} ({level.cpu_ms_per_call_s:.1f} ms)",
                f"{_rss_kib(level):.0f} KiB",
                f"{lag_p99:.0f} / {late:.0f}",
                f"{level.client_cpu_cores:.2f} ({level.clients}) / {level.fakes_cpu_cores:.2f}",
            ]
        )
    stages = [
        [
            _who(level),
            _spread(level, results, "detector_dating", signed=True),
            _spread(level, results, "server_endpointing", signed=True),
            _spread(level, results, "server_final"),
            _spread(level, results, "server_request", signed=True),
            _spread(level, results, "server_first_audio", signed=True),
            _spread(level, results, "llm_first_token", signed=True),
            _spread(level, results, "first_piece", signed=True),
            _spread(level, results, "tts_first_byte", signed=True),
            _spread(level, results, "to_the_sink"),
            _spread(level, results, "server_added", signed=True),
            _spread(level, results, "client_minus_server", signed=True),
            f"{level.seconds:.0f} s",
        ]
        for level in results.levels
    ]
    method = (
        "One `voice-membrane serve` process, or a group of `--workers N` where the size "
        "says so (afresh for each size, each worker warmed by a spoken question) on "
        "loopback, its pipeline written by the benchmark: `[stt]` "
        "`deepgram:nova-3` against the fake Deepgram (the question's words all heard in the "
        f"first 50 ms of each utterance's stream, `Finalize` answered after "
        f"{ms(setup.finalize_s)}), `[llm]` the fake OpenAI (first delta after "
        f"{ms(reply.llm_ttft_s)}, a {reply.delta_chars}-character delta every "
        f"{ms(reply.token_s)}), `[tts]` the fake ElevenLabs stream-input socket (first audio "
        f"{ms(reply.tts_ttfb_s)} after a piece), each fake in a process of its own; "
        f"`[endpoint] end_silence_s = {setup.end_silence_s:g}`, `preemptive = false` (the "
        "reply starts when the turn is decided: with it on, the reply would run during the "
        "end silence and the sum below would not hold). N callers from client processes "
        f"(up to {setup.callers_per_client} each), each a protocol-1.2 session sending pcm16 "
        f"{plan.sample_rate} Hz in {plan.frame_ms} ms frames in real time from the start "
        "(digital silence while not speaking, as a muted microphone: past eight windows "
        "of it the detector does not run its model, docs/listening.md), saying "
        f"{quoted(setup.question_text)} (`{setup.question.rsplit('/', 1)[-1]}`) first at a "
        f"random moment within {plan.ramp_s:g} s, then {plan.turns - 1} more times (a "
        "lone caller more: the turns' column says how many), each "
        f"{plan.think_s:g} s after the answer finished playing, and asking for the answer in "
        f"{plan.output_frame_ms} ms frames (as the page does). *Voice to voice* (client): "
        "the answer's first audio frame's arrival - the capture of the question's last voiced "
        "sample (the end of its last 4 ms block above -50 dBFS, the detector's loudness gate, "
        "on the detector's own blocks: quieter is silence to it, so no end silence starts "
        "earlier; dated as a microphone captures it: the send of the frame holding it less "
        "the rest of that frame). *Engines' own*: "
        f"the {ms(setup.end_silence_s)} end silence (the fake's final comes "
        f"{engines.final_ms:.0f} ms after the speech end — the detector's "
        f"{engines.final_ms - setup.finalize_s * 1000:.0f} ms `min_silence_s` and the "
        f"{ms(setup.finalize_s)} finalize — within "
        f"that silence, so it adds nothing) + {ms(reply.llm_ttft_s)} TTFT + "
        f"{engines.deltas - 1} deltas x {ms(reply.token_s)} to the first piece "
        f"{quoted(engines.first_piece)} + {ms(reply.tts_ttfb_s)} TTS TTFB = "
        f"{engines.total_ms:.0f} ms; *added* = voice to voice - that. *Server CPU*: cores "
        "over the calls' wall time (and ms of CPU per second of call); *RSS*: peak above "
        "the warmed server's, per caller; *client lag*: the client processes' event-loop "
        "lag p99 and their frames' latest send after schedule (p99), ms."
    )
    stage_note = (
        "Where it goes, ms p50 / p95 / max: *detector*: the detector's speech end "
        "(`vad.speech_end` `at_ms`) after the voiced end, in audio (both on its 4 ms blocks); "
        "from "
        "the server's `metrics` `voice_to_voice` (times after the detector's speech end, on "
        f"the server's clock): *endpointing* - the {ms(setup.end_silence_s)} wait, *STT "
        "final*, *decided → request*, *request → first audio* - the reply's own "
        f"{engines.reply_ms:.0f} ms, and of it the LLM's first token - its "
        f"{engines.llm_ttft_ms:.0f} ms, the first piece to the TTS after that token - the "
        f"{engines.deltas_ms:.0f} ms of deltas it takes (the chunker's wait and the deltas' "
        "reading), the TTS's first byte - its "
        f"{engines.tts_ttfb_ms:.0f} ms (what the fakes' own timers and the SDKs add) and the "
        "TTS's first audio to the sink's (the hops from the TTS socket to the client: "
        "the receiver, the TTS stage, the sink), *server added* (its voice to "
        "voice - the engines' own); "
        "*client - server*: the detector's dating, the rest of the frame holding the speech "
        "end (the server hears it when that frame arrives), the 20 ms frames and loopback "
        "both ways. "
        "A phone call's server figures are its serve log's `turn_end` lines (Twilio takes "
        "no events), matched to the caller's questions in order; its detector's speech end "
        "is not logged, so there *client - server* holds the detector's dating too."
        + _unmatched_note(results)
    )
    load = (
        f"One run on the shared 2-CPU machine (other work beside it): the 1-minute load "
        f"average was {results.load_before:.2f} before and {results.load_after:.2f} after; "
        f"the benchmark took {results.seconds:.0f} s."
    )
    return "\n\n".join(
        [
            f"## {VOICE_SERVE_TITLE}",
            method,
            table(
                [
                    "Callers, route",
                    "answered / asked",
                    "voice to voice p50 / p95 / max",
                    "added",
                    "errors",
                    "server CPU, cores (per call-second)",
                    "RSS per caller",
                    "client lag / send late",
                    "client / fakes CPU",
                ],
                rows,
            ),
            _verdict(results),
            stage_note,
            table(
                [
                    "Callers, route",
                    "detector",
                    "endpointing",
                    "STT final",
                    "decided → request",
                    "request → first audio",
                    "of it: LLM first token",
                    "first piece",
                    "TTS first byte",
                    "TTS → sink",
                    "server added",
                    "client - server",
                    "calls' wall time",
                ],
                stages,
            ),
            *_barge_part(results),
            load,
        ]
    )

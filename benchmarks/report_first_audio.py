"""The first-audio section of the benchmark report (``benchmarks.bench_first_audio``),
from the ``TargetRun`` of each setup (``voice_membrane.bench.runner``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from benchmarks.bench_first_audio import (
    DEFAULT_SETUP,
    ESPEAK_SETUP,
    MAX_TOKENS,
    NO_PRIORITY_SETUP,
    ONE_LLM_THREAD_SETUP,
    ONE_TTS_THREAD_SETUP,
    OPTION_SETUPS,
    PIPELINE_DEFAULT,
    PIPELINE_ESPEAK,
    SEED,
    SESSIONS,
    TARGET_ADDED_MS,
    TARGET_ESPEAK_P50_MS,
    TARGET_FIRST_AUDIO_P50_MS,
    TARGET_FIRST_AUDIO_P95_MS,
    FirstAudioResults,
    run_first_audio_bench,
)
from benchmarks.first_audio_figures import (
    counted,
    gaps,
    measured_runs,
    met,
    ms,
    p50_p95,
    pct,
    signed,
)
from benchmarks.scenario import Scenario, unavailable
from benchmarks.table import quoted, table
from voice_membrane.bench.prompts import WARM_UP_PROMPT
from voice_membrane.bench.runner import GAP_S, TargetRun
from voice_membrane.pipeline.build import SPEAKER_RATE
from voice_membrane.pipeline.config import load_pipeline

FIRST_AUDIO_TITLE = "First audio: warm latency of the embedded pipelines"


def _figures_table(runs: Sequence[TargetRun]) -> str:
    rows: list[list[object]] = []
    for run in runs:
        if run.error is not None:
            rows.append([run.target.label, f"not run: {run.error}", *["—"] * 9])
            continue
        rows.append(
            [
                f"{run.target.label} (`{run.llm}` → `{run.tts}`)",
                counted(run),
                p50_p95(run, "first_audio"),
                p50_p95(run, "ideal"),
                p50_p95(run, "llm_share"),
                p50_p95(run, "tts_ttfb"),
                p50_p95(run, "tts_alone"),
                p50_p95(run, "pipeline_added", 2),
                ms(pct(run, "tokens_to_first_chunk")),
                ms(pct(run, "llm_held")),
                gaps(run),
            ]
        )
    return table(
        [
            "Pipeline",
            "turns counted (excluded)",
            "first audio, ms p50 / p95",
            "engine-alone limit (ideal)",
            "LLM share (`first_chunk_token_ms`)",
            "TTS first byte, 1st piece",
            "TTS first byte alone",
            "pipeline added",
            "LLM deltas to 1st piece (p50)",
            "LLM held p50",
            "turns with a playback gap (gap ms)",
        ],
        rows,
    )


def _targets(results: FirstAudioResults) -> str:
    default, espeak = results.run(DEFAULT_SETUP), results.run(ESPEAK_SETUP)
    measured = measured_runs(results.runs)
    label = DEFAULT_SETUP.label

    def first_audio(q: float) -> str:
        limit = pct(default, "ideal", q)
        return f"{label}: {ms(pct(default, 'first_audio', q))} ms (engine-alone limit {ms(limit)})"

    gap_turns = sum(run.gaps()["turns"] for run in measured)
    turns = sum(len(run.turns) for run in measured)
    gapped = [run for run in measured if run.gaps()["turns"]]
    underruns = (
        "; ".join(f"{run.target.label}: {gaps(run)}" for run in gapped)
        if gapped
        else f"none in {turns} turns"
    )
    added = [(run, pct(run, "pipeline_added")) for run in measured]
    worst_added = max((v for _, v in added if v is not None), default=None)
    cores = f"{results.cpus} CPUs here"
    return table(
        ["Target (from the project's issues)", "measured", "verdict"],
        [
            [
                f"the embedded default reaches first audio in ≤ "
                f"{TARGET_FIRST_AUDIO_P50_MS:g} ms p50 on 2 cores ({cores})",
                first_audio(0.5),
                met(pct(default, "first_audio"), TARGET_FIRST_AUDIO_P50_MS),
            ],
            [
                f"… and ≤ {TARGET_FIRST_AUDIO_P95_MS:g} ms p95",
                first_audio(0.95),
                met(pct(default, "first_audio", 0.95), TARGET_FIRST_AUDIO_P95_MS),
            ],
            [
                f"the espeak pipeline reaches first audio in ≤ {TARGET_ESPEAK_P50_MS:g} ms p50",
                f"{ESPEAK_SETUP.label}: {ms(pct(espeak, 'first_audio'))} ms",
                met(pct(espeak, "first_audio"), TARGET_ESPEAK_P50_MS),
            ],
            [
                "no underrun in any benchmark turn (turns with a playback gap, gap ms)",
                underruns if measured else "—",
                met(float(gap_turns) if measured else None, 0),
            ],
            [
                f"the pipeline adds ≤ {TARGET_ADDED_MS:g} ms at p50",
                "; ".join(f"{run.target.label}: {ms(v, 2)} ms" for run, v in added) or "—",
                met(worst_added, TARGET_ADDED_MS),
            ],
        ],
    )


def _breakdown(runs: Sequence[TargetRun]) -> str:
    words = ms(pct(runs[0], "first_piece_words"))

    def row(part: str, what: str, value: Callable[[TargetRun], float | None]) -> list[object]:
        return [part, *(ms(value(run), 1) for run in runs), what]

    rows = [
        row(
            "request → first token",
            "llama.cpp evaluates the prompt (the system prompt is reused from its KV cache) "
            "and samples the first token",
            lambda run: pct(run, "first_token"),
        ),
        row(
            "first token → the delta that released the first piece",
            f"{ms(pct(runs[0], 'tokens_to_first_chunk'))} deltas (p50) for a first piece "
            f"of {words} words: the chunker releases it when the delta after its last word "
            "shows the word has ended",
            lambda run: pct(run, "after_first_token"),
        ),
        row("(LLM pace over that stretch, ms per delta)", "", lambda r: pct(r, "ms_per_token")),
        row(
            "TTS: first audio of the first piece, in the pipeline",
            "from the piece's hand-over to the engine",
            lambda run: pct(run, "tts_ttfb"),
        ),
        row(
            "(TTS first byte alone)",
            "each turn's first piece spoken again by the engine after the session's turns, "
            "nothing else running",
            lambda run: pct(run, "tts_alone"),
        ),
        row(
            "LLM held by first-audio priority",
            "the reply stage asked the LLM for nothing more until the piece's first audio",
            lambda run: pct(run, "llm_held"),
        ),
        row(
            "pipeline's own (`pipeline_added_ms`)",
            "parsing, chunking, stream hops, scheduling, the sink taking the first audio",
            lambda run: pct(run, "pipeline_added"),
        ),
        row("first audio", "", lambda run: pct(run, "first_audio")),
        row(
            "engine-alone limit (ideal)",
            "each turn's LLM share + the TTS first byte alone",
            lambda run: pct(run, "ideal"),
        ),
        row(
            "excess over the limit",
            "first audio - ideal, per turn",
            lambda run: pct(run, "excess"),
        ),
    ]
    return table(["Part (p50, ms)", *(run.target.label for run in runs), "what it is"], rows)


def _options(results: FirstAudioResults) -> str:
    default = results.run(DEFAULT_SETUP)
    base = pct(default, "first_audio")
    rows: list[list[object]] = []
    for setup in (DEFAULT_SETUP, ESPEAK_SETUP, *OPTION_SETUPS):
        run = results.run(setup)
        if run is None:
            continue
        change = setup.option or "none: `pipelines/local.toml` as shipped"
        if run.error is not None:
            rows.append([change, f"not run: {run.error}", *["—"] * 7])
            continue
        sessions = range(run.sessions)
        rows.append(
            [
                change,
                counted(run),
                ms(pct(run, "first_audio")),
                " / ".join(ms(pct(run, "first_audio", session=i)) for i in sessions),
                ms(pct(run, "first_audio", 0.95)),
                "—" if setup == DEFAULT_SETUP else signed(pct(run, "first_audio"), base),
                ms(pct(run, "llm_share")),
                ms(pct(run, "tts_ttfb")),
                ms(pct(run, "llm_held")),
            ]
        )
    return table(
        [
            "Change to the default pipeline",
            "turns counted (excluded)",
            "first audio p50, ms",
            "p50 per session",
            "p95",
            "Δ p50 vs default",
            "LLM share p50",
            "TTS first byte p50",
            "LLM held p50 (priority on)",
        ],
        rows,
    )


def _share(part: float | None, whole: float | None) -> str:
    return "" if part is None or not whole else f" ({part / whole:.0%})"


def _vs(value: float, base: float) -> str:
    """``value`` beside ``base``, and the difference: true whatever they are."""
    return f"{value:.0f} ms against {base:.0f} ms ({value - base:+.0f})"


def _findings(results: FirstAudioResults) -> list[str]:
    default = results.run(DEFAULT_SETUP)
    assert default is not None
    fa, ideal = pct(default, "first_audio"), pct(default, "ideal")
    llm, tts, alone = (
        pct(default, "llm_share"),
        pct(default, "tts_ttfb"),
        pct(default, "tts_alone"),
    )
    lines = [
        f"- Of the default pipeline's {ms(fa)} ms to first audio (p50), the LLM's share is "
        f"{ms(llm)} ms{_share(llm, fa)} and Piper's first audio of the first piece "
        f"{ms(tts)} ms{_share(tts, fa)}; the pipeline itself adds "
        f"{ms(pct(default, 'pipeline_added'), 2)} ms.",
    ]
    excess = pct(default, "excess")
    if ideal is not None and excess is not None:
        lines.append(
            f"- Its engine-alone limit (each turn's LLM share + Piper's first byte alone) is "
            f"{ideal:.0f} ms at p50; first audio was {abs(excess):.0f} ms "
            f"{'above' if excess >= 0 else 'below'} its turn's limit at p50."
        )
    if tts is not None and alone is not None:
        lines.append(
            f"- Piper's first audio of the first piece, in the pipeline against alone "
            f"(p50; each turn's first piece spoken again after the turns, nothing else running "
            f"on the {results.cpus} CPUs): {_vs(tts, alone)}."
        )
    off = results.run(NO_PRIORITY_SETUP)
    off_fa = pct(off, "first_audio")
    if off is not None and off_fa is not None and fa is not None:
        held = pct(default, "llm_held")
        off_tts = pct(off, "tts_ttfb")
        tts_text = (
            "" if off_tts is None or tts is None else f"; Piper's first byte {_vs(tts, off_tts)}"
        )
        if held is None:  # "auto" did not turn it on: there is no comparison to make
            lines.append(
                "- The default pipeline held no turn's LLM (first-audio priority was off); "
                f"first audio p50 {_vs(fa, off_fa)} with it set off."
            )
        else:
            lines.append(
                f"- First-audio priority, on (as the default pipeline has it) against off: "
                f"first audio p50 {_vs(fa, off_fa)}{tts_text}; it held the LLM {held:.0f} ms "
                f"per turn (p50). Turns with a playback gap: {default.gaps()['turns']:.0f} "
                f"with it on, {off.gaps()['turns']:.0f} off."
            )
    for setup, engine, part in (
        (ONE_LLM_THREAD_SETUP, "llama.cpp", "llm_share"),
        (ONE_TTS_THREAD_SETUP, "Piper", "tts_ttfb"),
    ):
        run = results.run(setup)
        value, own, base = pct(run, "first_audio"), pct(run, part), pct(default, part)
        if value is not None and fa is not None and own is not None and base is not None:
            what = "its LLM share" if part == "llm_share" else "its first byte of the first piece"
            lines.append(
                f"- {engine} on one thread against every core: first audio p50 "
                f"{_vs(value, fa)}; {what} {_vs(own, base)}."
            )
    espeak = results.run(ESPEAK_SETUP)
    if espeak is not None and espeak.error is None:
        lines.append(
            "- Same LLM, prompts and replies, but before the first piece, while the TTS engine "
            "has nothing to do yet: first token "
            f"{ms(pct(default, 'first_token'))} ms with Piper, "
            f"{ms(pct(espeak, 'first_token'))} ms with espeak-ng; "
            f"{ms(pct(default, 'ms_per_token'), 1)} against "
            f"{ms(pct(espeak, 'ms_per_token'), 1)} ms per delta after it."
        )
    return lines


def first_audio_section(results: FirstAudioResults) -> str:
    default, espeak = results.run(DEFAULT_SETUP), results.run(ESPEAK_SETUP)
    main = [run for run in (default, espeak) if run is not None]
    if not measured_runs(main):
        errors = [run.error for run in main if run.error] or ["no setup was run"]
        return unavailable(FIRST_AUDIO_TITLE, RuntimeError(errors[0]))
    parts = [
        f"## {FIRST_AUDIO_TITLE}",
        "User-perceived first-audio latency (`first_audio`, ms since the LLM request) of the "
        "two embedded pipelines, measured by the engine of `voice-membrane bench` "
        "(docs/bench.md), each session with its engines already started, over "
        f"{len(results.prompts)} short voice-assistant prompts. Figures are p50 / p95 "
        "(nearest rank) over the counted turns, in ms; interrupted or failed turns are "
        "excluded and counted in brackets. *LLM share* is `first_chunk_token_ms`, the "
        "arrival of the LLM delta that released the first piece; *TTS first byte* is "
        "`tts_first_byte \u2212 tts_request` for that piece, *alone* the same with nothing "
        "else running; *pipeline added* is first audio minus both (see `docs/metrics.md`). "
        "The *engine-alone limit* (the command's *ideal*) is each turn's LLM share plus the "
        "TTS first byte alone: the earliest first audio that turn allowed. *LLM deltas to "
        "1st piece* counts the text deltas (about one token each) up to and including that "
        "delta (`tokens_to_first_chunk`). *LLM held*: how long first-audio priority kept "
        "the LLM waiting in a turn. A *playback gap*: real-time playback of the engine's "
        "audio, started at its first audio, would have run dry (`audio_gaps`).",
        "### Targets",
        _targets(results),
        "### Figures",
        _figures_table(main),
    ]
    if default is not None and default.error is None:
        warm_up = default.warm_ups[0] if default.warm_ups else None
        if warm_up is not None and warm_up.report is not None and default.open_s is not None:
            parts.append(
                f"The default pipeline's first session opened (model and voice loaded) in "
                f"{default.open_s:.1f} s; its warm-up turn, the first after start, reached "
                f"first token in {ms(warm_up.report.stamps_ms['first_token'])} ms and first "
                f"audio in {ms(warm_up.report.first_audio_ms)} ms (not counted)."
            )
        parts += [
            "### Where the time goes",
            "Percentiles of each part over the counted turns; p50s of parts need not add up "
            "to the p50 of the whole.",
            _breakdown(measured_runs(main)),
            "### What moves first-audio latency",
            "The default pipeline with one change per row. *p50 per session* gives the p50 of "
            f"each of the setup's {SESSIONS} sessions (on alternate prompts): a difference "
            "between rows smaller than the spread within a row is noise. *First-audio "
            "priority* (`[scheduling] first_audio_priority`, `voice_membrane/pipeline/"
            "scheduling.py`): from the first piece's hand-over to the TTS engine until its "
            "first audio (and for a later piece while little audio is queued ahead) the "
            "reply stage asks the LLM for nothing more, so that only the step it is "
            "computing competes with the engine for the cores; on by default when both "
            "engines compute on this machine. *Threads*: llama.cpp's and Piper's "
            "onnxruntime intra-op threads, each every core by default.",
            _options(results),
            "\n".join(_findings(results)),
        ]
    parts += ["### How it was measured", _method(results)]
    return "\n\n".join(parts)


def _method(results: FirstAudioResults) -> str:
    prompts = "; ".join(quoted(p) for p in results.prompts)
    return (
        "`make bench` runs the `voice-membrane bench` command's engine "
        "(`voice_membrane.bench.runner`): each setup is a `Target`, a shipped pipeline file "
        "with the overrides below and its one change. *Warm* means the engines were started "
        "once per session (the GGUF model loaded by llama.cpp, the Piper voice loaded and "
        "warmed up, espeak-ng's spare process running) and one uncounted warm-up turn "
        f"({quoted(WARM_UP_PROMPT)}) was run, so the system prompt is in llama.cpp's KV "
        "cache. After a session's counted turns, the engine spoke each turn's first piece "
        "again on its own (*TTS first byte alone*, that turn's). Each counted prompt is "
        "then a fresh conversation (the history is cleared): the system prompt and one user "
        "message. Options are those of `pipelines/local.toml` and "
        f"`pipelines/local-espeak.toml` (temperature {_temperature()}, the default system "
        f"prompt, chunker and `[scheduling]`), except `max_tokens` = {MAX_TOKENS} instead of "
        "120, to keep the run short (first audio comes long before that), and a fixed "
        f"`[llm] seed` ({SEED}) so that every setup hears the same reply to a prompt. The "
        f'sink is the null sink at {SPEAKER_RATE} Hz (`[sink] kind = "null"`), not real '
        "time: it takes audio as fast as it comes, which does not change when the first "
        "audio arrives. `first_audio` is when a sink's playback takes the first sample "
        "(docs/metrics.md); for this sink that is the sink stage's first write. A speaker's "
        "device callback takes it at its next 10 ms block, 0-10 ms later (a real-time null "
        "sink, `realtime = true`, waits the same), and the sound is heard one output "
        "latency (~40 ms through PulseAudio) after that; neither wait is in these figures. "
        f"Before each turn the runner waits {GAP_S:g} s, as a user would. Each setup runs "
        f"in {SESSIONS} sessions, one session at a time, each in its own event loop (so "
        "sessions share the loaded model, as in one process, but not threads), on "
        "alternate prompts; the setups take turns, in the order of the table and then in "
        "reverse, so that a change in the machine's load falls on all alike. Prompts: "
        f"{prompts}. One run on a shared {results.cpus}-CPU machine: the 1-minute load "
        f"average was {results.load_before:.2f} before the benchmark and "
        f"{results.load_after:.2f} after it (its own load included); the benchmark took "
        f"{results.seconds:.0f} s. Skip it with `--skip-first-audio`."
    )


def _temperature() -> str:
    files = (PIPELINE_DEFAULT, PIPELINE_ESPEAK)
    return ", ".join(dict.fromkeys(f"{load_pipeline(p).llm.temperature:g}" for p in files))


SCENARIO = Scenario(
    "first-audio",
    (FIRST_AUDIO_TITLE,),
    run_first_audio_bench,
    lambda r: [first_audio_section(r)],
    True,
)

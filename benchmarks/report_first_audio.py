"""The first-audio section of the benchmark report (``benchmarks.bench_first_audio``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from benchmarks.bench_first_audio import (
    DEFAULT_SETUP,
    ESPEAK_SETUP,
    GAP_S,
    HELD_SETUP,
    MAX_TOKENS,
    OPTION_SETUPS,
    PIPELINE_DEFAULT,
    PIPELINE_ESPEAK,
    PROMPTS,
    SEED,
    SESSIONS,
    SINK_RATE,
    TARGET_ADDED_MS,
    TARGET_FIRST_AUDIO_MS,
    WARM_UP_PROMPT,
    FirstAudioResults,
    PipelineRun,
)
from benchmarks.markdown import quoted, table
from benchmarks.report import unavailable
from benchmarks.stats import median
from voice_membrane.pipeline.config import load_pipeline

FIRST_AUDIO_TITLE = "First audio: warm latency of the embedded pipelines"


def _ms(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _p50_p95(run: PipelineRun, name: str, digits: int = 0) -> str:
    return f"{_ms(run.p50(name), digits)} / {_ms(run.p95(name), digits)}"


def _counted(run: PipelineRun) -> str:
    return f"{len(run.counted)} ({run.excluded})"


def _met(value: float | None, target: float) -> str:
    if value is None:
        return "not measured"
    return "**met**" if value <= target else "**missed**"


def _delta(value: float | None, base: float | None) -> str:
    return "—" if value is None or base is None else f"{value - base:+.0f}"


def _figures_table(runs: Sequence[PipelineRun]) -> str:
    rows: list[list[object]] = []
    for run in runs:
        if run.error is not None:
            rows.append([run.setup.label, f"not run: {run.error}", *["—"] * 6])
            continue
        rows.append(
            [
                f"{run.setup.label} (`{run.llm}` → `{run.tts}`)",
                _counted(run),
                _p50_p95(run, "first_audio"),
                _p50_p95(run, "first_token"),
                _p50_p95(run, "first_chunk_token"),
                _p50_p95(run, "tts_first_byte"),
                _p50_p95(run, "pipeline_added", 2),
                _ms(run.p50("tokens_to_first_piece")),
            ]
        )
    return table(
        [
            "Pipeline",
            "turns counted (excluded)",
            "first audio, ms p50 / p95",
            "first token",
            "LLM share (`first_chunk_token_ms`)",
            "TTS first byte, 1st piece",
            "pipeline added",
            "LLM deltas to 1st piece (median)",
        ],
        rows,
    )


def _targets(default: PipelineRun, runs: Sequence[PipelineRun]) -> str:
    measured = [run for run in runs if run.error is None]
    added = "; ".join(
        f"{run.setup.label}: {_ms(run.p50('pipeline_added'), 2)} ms" for run in measured
    )
    values = [v for run in measured if (v := run.p50("pipeline_added")) is not None]
    worst_added = max(values) if values else None
    first_audio = default.p50("first_audio")
    return table(
        ["Target (from the project's issue)", "measured, p50", "verdict"],
        [
            [
                f"the pipeline adds ≤ {TARGET_ADDED_MS:g} ms at p50",
                added or "—",
                _met(worst_added, TARGET_ADDED_MS),
            ],
            [
                f"the embedded default reaches first audio in ≤ {TARGET_FIRST_AUDIO_MS:g} ms p50 "
                "warm on 2 cores",
                f"{default.setup.label}: {_ms(first_audio)} ms",
                _met(first_audio, TARGET_FIRST_AUDIO_MS),
            ],
        ],
    )


def _breakdown(default: PipelineRun, espeak: PipelineRun | None) -> str:
    runs = [default] if espeak is None or espeak.error is not None else [default, espeak]
    words = _ms(default.p50("first_piece_words"))

    def row(part: str, what: str, value: Callable[[PipelineRun], float | None]) -> list[object]:
        return [part, *(_ms(value(run), 1) for run in runs), what]

    def idle(run: PipelineRun) -> float | None:
        return median(run.idle_tts_ms) if run.idle_tts_ms else None

    rows = [
        row(
            "request → first token",
            "llama.cpp evaluates the prompt (the system prompt is reused from its KV cache) "
            "and samples the first token",
            lambda run: run.p50("first_token"),
        ),
        row(
            "first token → the delta that released the first piece",
            f"{_ms(default.p50('tokens_to_first_piece'))} deltas (median) for a first piece of "
            f"{words} words: the chunker releases it when the delta after its last word "
            "shows the word has ended",
            lambda run: run.p50("after_first_token"),
        ),
        row(
            "(LLM pace over that stretch, ms per delta)",
            "",
            lambda run: run.p50("ms_per_token"),
        ),
        row(
            "TTS: first audio of the first piece, in the pipeline",
            "the engine speaks while the LLM goes on generating the reply",
            lambda run: run.p50("tts_first_byte"),
        ),
        row(
            "(the same pieces, engine alone)",
            "each turn's first piece spoken again after the turns, nothing else running",
            idle,
        ),
        row(
            "pipeline's own (`pipeline_added_ms`)",
            "parsing, chunking, stream hops, scheduling, the sink taking the first audio",
            lambda run: run.p50("pipeline_added"),
        ),
        row("first audio", "", lambda run: run.p50("first_audio")),
    ]
    return table(["Part (p50, ms)", *(run.setup.label for run in runs), "what it is"], rows)


def _options(default: PipelineRun, runs: Sequence[PipelineRun]) -> str:
    base = default.p50("first_audio")
    rows: list[list[object]] = []
    for run in runs:
        change = run.setup.option or "none: `pipelines/local.toml` as shipped"
        if run.error is not None:
            rows.append([change, f"not run: {run.error}", *["—"] * 7])
            continue
        rows.append(
            [
                change,
                _counted(run),
                _ms(run.p50("first_audio")),
                " / ".join(_ms(run.p50("first_audio", i)) for i in range(SESSIONS)),
                _ms(run.p95("first_audio")),
                "—" if run is default else _delta(run.p50("first_audio"), base),
                _ms(run.p50("first_token")),
                _ms(run.p50("first_chunk_token")),
                _ms(run.p50("tts_first_byte")),
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
            "first token p50",
            "LLM share p50",
            "TTS first byte p50",
        ],
        rows,
    )


def _share(part: float | None, whole: float | None) -> str:
    return "" if part is None or not whole else f" ({part / whole:.0%})"


def _first_audio_findings(results: FirstAudioResults) -> list[str]:
    default = results.run(DEFAULT_SETUP)
    fa = default.p50("first_audio")
    llm, tts = default.p50("first_chunk_token"), default.p50("tts_first_byte")
    idle = median(default.idle_tts_ms) if default.idle_tts_ms else None
    lines = [
        f"- Of the default pipeline's {_ms(fa)} ms to first audio (p50), the LLM's share is "
        f"{_ms(llm)} ms{_share(llm, fa)} and Piper's first audio of the first piece "
        f"{_ms(tts)} ms{_share(tts, fa)}; the pipeline itself adds "
        f"{_ms(default.p50('pipeline_added'), 2)} ms.",
        f"- Piper needs {_ms(idle)} ms for the same first pieces on its own but {_ms(tts)} ms "
        "in the pipeline, where llama.cpp goes on generating the reply on the same "
        f"{results.cpus} cores (Piper's onnxruntime starts as many threads as there are "
        "cores, llama.cpp one per CPU by default).",
    ]
    espeak = results.run(ESPEAK_SETUP)
    if espeak.error is None:
        lines.append(
            "- Same LLM, prompts and replies, but before the first piece, while the TTS engine "
            "has nothing to do yet: first token "
            f"{_ms(default.p50('first_token'))} ms with Piper, "
            f"{_ms(espeak.p50('first_token'))} ms with espeak-ng; "
            f"{_ms(default.p50('ms_per_token'), 1)} against "
            f"{_ms(espeak.p50('ms_per_token'), 1)} ms per delta after it."
        )
    held = results.run(HELD_SETUP)
    if held.error is None:
        lines.append(
            "- With the LLM held while the first piece is synthesized (second diagnostic), "
            f"Piper's first audio of the first piece took {_ms(held.p50('tts_first_byte'))} ms "
            f"(default {_ms(tts)}, Piper alone {_ms(idle)})."
        )
    return lines


def first_audio_section(results: FirstAudioResults) -> str:
    default = results.run(DEFAULT_SETUP)
    espeak = results.run(ESPEAK_SETUP)
    if default.error is not None and espeak.error is not None:
        return unavailable(FIRST_AUDIO_TITLE, RuntimeError(default.error))
    main = [default, espeak]
    opened = ""
    if default.error is None and default.warm_up is not None:
        opened = (
            f"The default pipeline's first session opened (model and voice loaded) in "
            f"{default.start_s:.1f} s; its warm-up turn, the first after start, reached first "
            f"token in {_ms(default.warm_up.report.stamps_ms['first_token'])} ms and first "
            f"audio in {_ms(default.warm_up.report.first_audio_ms)} ms (not counted)."
        )
    parts = [
        f"## {FIRST_AUDIO_TITLE}",
        "User-perceived first-audio latency (`first_audio`, ms since the LLM request) of the "
        "two embedded pipelines, each one `Session` with its engines already started, "
        f"over {len(PROMPTS)} short voice-assistant prompts. Figures are p50 / p95 "
        "(nearest rank) over the counted turns, in ms; interrupted or failed turns are "
        "excluded and counted in brackets. *LLM share* is `first_chunk_token_ms`, the "
        "arrival of the LLM delta that released the first piece; *TTS first byte* is "
        "`tts_first_byte \u2212 tts_request` for that piece; *pipeline added* is first audio "
        "minus both (see `docs/metrics.md`). *LLM deltas to 1st piece* counts the text "
        "deltas (about one token each) up to and including that delta.",
        "### Targets",
        _targets(default, main),
        "### Figures",
        _figures_table(main),
    ]
    if opened:
        parts.append(opened)
    if default.error is None:
        parts += [
            "### Where the time goes",
            "Medians of each part over the counted turns; medians of parts need not add up "
            "to the median of the whole.",
            _breakdown(default, espeak),
            "### What moves first-audio latency",
            "The default pipeline with one change per row. *p50 per "
            f"session* gives the p50 of each of the setup's {SESSIONS} sessions "
            f"({len(PROMPTS) // SESSIONS} prompts each): a difference between rows smaller "
            "than the spread within a row is noise.",
            _options(default, [default, espeak, *(results.run(s) for s in OPTION_SETUPS)]),
            "The last row is a diagnostic made in `benchmarks/bench_first_audio.py`, not "
            "a library option. `LocalLlama` runs every llama.cpp call of a model on one "
            "thread of its own: this OpenMP build keeps a thread pool per calling thread, "
            "and stepping it from whichever anyio worker thread was free (beside Piper, "
            "which uses worker threads too) made each token about 1.5 times slower. "
            "*Held*: the benchmark's "
            "wrapper around the LLM source asks for no delta from the moment the first piece "
            "is handed to the TTS engine until its first audio reaches the sink (the token "
            "being computed still finishes), so that the engine has the CPUs to itself: what "
            "a pipeline that paused the LLM for its first piece would gain.",
            "\n".join(_first_audio_findings(results)),
        ]
    parts += ["### How it was measured", _first_audio_method(results)]
    return "\n\n".join(parts)


def _first_audio_method(results: FirstAudioResults) -> str:
    prompts = "; ".join(quoted(p) for p in PROMPTS)
    return (
        "*Warm* means the engines were started once per setup (the GGUF model loaded by "
        "llama.cpp, the Piper voice loaded and warmed up, espeak-ng's spare process "
        f"running) and one uncounted warm-up turn ({quoted(WARM_UP_PROMPT)}) was run, so "
        "the system prompt is in llama.cpp's KV cache. Each counted prompt is then a fresh "
        "conversation (the history is cleared): the system prompt and one user message. "
        "Options are those of `pipelines/local.toml` and `pipelines/local-espeak.toml` "
        f"(temperature {_temperature()}, the default system prompt and chunker), except "
        f"`max_tokens` = {MAX_TOKENS} instead of 120, to keep the run short (first audio "
        f"comes long before that), and a fixed seed ({SEED}) so that every setup hears the "
        f"same reply to a prompt. The sink is `NullSink(sample_rate={SINK_RATE})`, not real "
        "time: it takes audio as fast as it comes, which does not change when the first "
        "audio arrives. `first_audio` is when a sink's playback takes the first sample "
        "(docs/metrics.md); for this sink that is the sink stage's first write. A speaker's "
        "device callback takes it at its next 10 ms block, 0-10 ms later (a real-time null "
        'sink, `[sink] kind = "null"`, `realtime = true`, waits the same), and the sound '
        "is heard one output latency (~40 ms through PulseAudio) after that; neither wait "
        f"is in these figures. Before each turn the benchmark waits {GAP_S:g} s, as a user would. "
        f"Each setup runs in {SESSIONS} sessions, one session at a time, each in its own "
        "event loop (so sessions share the loaded model, as in one process, but not "
        "threads), on alternate prompts; the setups take turns, in the order of the table "
        "and then in reverse, so that a change in the machine's load falls on all alike. "
        "Prompts: "
        f"{prompts}. One run on a shared {results.cpus}-CPU machine: the 1-minute load "
        f"average was {results.load_before:.2f} before the benchmark and "
        f"{results.load_after:.2f} after it (its own load included); the benchmark took "
        f"{results.seconds:.0f} s. Skip it with `--skip-first-audio`."
    )


def _temperature() -> str:
    files = (PIPELINE_DEFAULT, PIPELINE_ESPEAK)
    return ", ".join(dict.fromkeys(f"{load_pipeline(p).llm.temperature:g}" for p in files))

"""The first-audio section of the benchmark report (``benchmarks.first_audio``),
from the ``TargetRun`` of each setup (``voice_membrane.bench.runner``): each counted
turn's figures (the runner's own and those derived here), their nearest-rank
percentiles and the tables and findings they make."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from benchmarks.first_audio import (
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
from benchmarks.prose import prose, title
from benchmarks.scenario import Scenario, unavailable
from benchmarks.table import Column, met, quoted, table
from voice_membrane.bench.prompts import WARM_UP_PROMPT
from voice_membrane.bench.runner import GAP_S, TargetRun, TurnSample
from voice_membrane.bench.stats import Spread, nearest_rank
from voice_membrane.pipeline.build import SPEAKER_RATE
from voice_membrane.pipeline.config import load_pipeline

FIRST_AUDIO_TITLE = title("first-audio")


def _after_first_token(turn: TurnSample) -> float | None:
    assert turn.report is not None  # counted turns only
    token, first = turn.report.first_chunk_token_ms, turn.report.stamps_ms["first_token"]
    return None if token is None or first is None else token - first


def _ms_per_token(turn: TurnSample) -> float | None:
    assert turn.report is not None
    between, n = _after_first_token(turn), turn.report.tokens_to_first_chunk
    return None if between is None or n is None or n < 2 else between / (n - 1)


def _tokens(turn: TurnSample) -> float | None:
    assert turn.report is not None
    n = turn.report.tokens_to_first_chunk
    return None if n is None else float(n)


def _words(turn: TurnSample) -> float | None:
    return None if turn.first_piece is None else float(len(turn.first_piece.split()))


# Per-turn figures of this report beyond the runner's own (``TargetRun.figures``).
DERIVED: dict[str, Callable[[TurnSample], float | None]] = {
    "after_first_token": _after_first_token,  # first token → the delta that released piece 1
    "ms_per_token": _ms_per_token,  # the LLM's pace over that stretch
    "tokens_to_first_chunk": _tokens,
    "first_piece_words": _words,
}


def turn_values(run: TargetRun, name: str, session: int | None = None) -> list[float]:
    """A figure's values over the counted turns (of one session if given)."""
    turns = [t for t in run.counted if session is None or t.session == session]
    derive = DERIVED.get(name) or (lambda turn: run.figures(turn).get(name))
    return [v for turn in turns if (v := derive(turn)) is not None]


def pct(
    run: TargetRun | None, name: str, q: float = 0.5, session: int | None = None
) -> float | None:
    """Nearest-rank percentile, as the command reports it (None: not measured)."""
    if run is None or run.error is not None:
        return None
    found = turn_values(run, name, session)
    return nearest_rank(found, q) if found else None


def ms(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _counted(run: TargetRun) -> str:
    return f"{len(run.counted)} ({len(run.turns) - len(run.counted)})"


def _gaps(run: TargetRun) -> str:
    gaps = run.gaps()
    return f"{gaps['turns']:.0f} ({gaps['ms']:.0f} ms)"


def _measured(runs: Sequence[TargetRun | None]) -> list[TargetRun]:
    return [run for run in runs if run is not None and run.error is None]


def _p50(name: str) -> Callable[[TargetRun], str]:
    return lambda run: ms(pct(run, name))


def _p50_p95(name: str, digits: int = 0) -> Callable[[TargetRun], str]:
    spread = Spread(("p50", "p95"), digits)
    return lambda run: spread.cell(turn_values(run, name))


FIGURES: list[Column[TargetRun]] = [
    Column("Pipeline", lambda r: f"{r.target.label} (`{r.llm}` → `{r.tts}`)"),
    Column("turns counted (excluded)", _counted),
    Column("first audio", lambda r: turn_values(r, "first_audio"), Spread(), "ms"),
    Column("engine-alone limit (ideal)", _p50_p95("ideal")),
    Column("LLM share (`first_chunk_token_ms`)", _p50_p95("llm_share")),
    Column("TTS first byte, 1st piece", _p50_p95("tts_ttfb")),
    Column("TTS first byte alone", _p50_p95("tts_alone")),
    Column("pipeline added", _p50_p95("pipeline_added", 2)),
    Column("LLM deltas to 1st piece (p50)", _p50("tokens_to_first_chunk")),
    Column("LLM held p50", _p50("llm_held")),
    Column("turns with a playback gap (gap ms)", _gaps),
]
# What each setup changes, as a user would (by label, as ``FirstAudioResults.run``).
CHANGES = {
    s.label: s.option or "none: `pipelines/local.toml` as shipped"
    for s in (DEFAULT_SETUP, ESPEAK_SETUP, *OPTION_SETUPS)
}


def _options(base: float | None) -> list[Column[TargetRun]]:
    """The columns of the options table; ``base``: the default's first audio p50."""

    def delta(run: TargetRun) -> str:
        value = pct(run, "first_audio")
        if run.target.label == DEFAULT_SETUP.label or value is None or base is None:
            return "—"
        return f"{value - base:+.0f}"

    def per_session(run: TargetRun) -> str:
        return " / ".join(ms(pct(run, "first_audio", session=i)) for i in range(run.sessions))

    return [
        Column("Change to the default pipeline", lambda r: CHANGES[r.target.label]),
        Column("turns counted (excluded)", _counted),
        Column("first audio p50, ms", _p50("first_audio")),
        Column("p50 per session", per_session),
        Column("p95", lambda r: ms(pct(r, "first_audio", 0.95))),
        Column("Δ p50 vs default", delta),
        Column("LLM share p50", _p50("llm_share")),
        Column("TTS first byte p50", _p50("tts_ttfb")),
        Column("LLM held p50 (priority on)", _p50("llm_held")),
    ]


def _render(
    columns: list[Column[TargetRun]], runs: Sequence[TargetRun], name: Callable[[TargetRun], str]
) -> str:
    """The table; a run that did not start gives its ``name`` and why."""
    blank = ["—"] * (len(columns) - 2)
    rows = [
        [c.render(run) for c in columns]
        if run.error is None
        else [name(run), f"not run: {run.error}", *blank]
        for run in runs
    ]
    return table([c.header for c in columns], rows)


def _targets(results: FirstAudioResults) -> dict[str, object]:
    default, espeak = results.run(DEFAULT_SETUP), results.run(ESPEAK_SETUP)
    measured = _measured(results.runs)

    def first_audio(q: float) -> str:
        at, limit = ms(pct(default, "first_audio", q)), ms(pct(default, "ideal", q))
        return f"{DEFAULT_SETUP.label}: {at} ms (engine-alone limit {limit})"

    gapped = [run for run in measured if run.gaps()["turns"]]
    turns = sum(len(run.turns) for run in measured)
    added = [(run, pct(run, "pipeline_added")) for run in measured]
    return {
        "target_p50": TARGET_FIRST_AUDIO_P50_MS,
        "target_p95": TARGET_FIRST_AUDIO_P95_MS,
        "target_espeak": TARGET_ESPEAK_P50_MS,
        "target_added": TARGET_ADDED_MS,
        "default_p50": first_audio(0.5),
        "default_p50_met": met(pct(default, "first_audio"), TARGET_FIRST_AUDIO_P50_MS),
        "default_p95": first_audio(0.95),
        "default_p95_met": met(pct(default, "first_audio", 0.95), TARGET_FIRST_AUDIO_P95_MS),
        "espeak_p50": f"{ESPEAK_SETUP.label}: {ms(pct(espeak, 'first_audio'))} ms",
        "espeak_p50_met": met(pct(espeak, "first_audio"), TARGET_ESPEAK_P50_MS),
        "underruns": "; ".join(f"{run.target.label}: {_gaps(run)}" for run in gapped)
        or (f"none in {turns} turns" if measured else "—"),
        "underruns_met": met(float(len(gapped)) if measured else None, 0),
        "added": "; ".join(f"{run.target.label}: {ms(v, 2)} ms" for run, v in added) or "—",
        "added_met": met(
            max((v for _, v in added if v is not None), default=None), TARGET_ADDED_MS
        ),
    }


def _breakdown(runs: Sequence[TargetRun]) -> str:
    """The parts of first audio (``first-audio#parts``: part | figure | what it is)."""
    words = ms(pct(runs[0], "first_piece_words"))
    parts = prose(
        "first-audio#parts", deltas=ms(pct(runs[0], "tokens_to_first_chunk")), words=words
    )
    rows = []
    for line in parts.splitlines()[2:]:
        part, name, what = (cell.strip() for cell in line.split("|"))
        rows.append([part, *(ms(pct(run, name), 1) for run in runs), what])
    return table(["Part (p50, ms)", *(run.target.label for run in runs), "what it is"], rows)


def _options_table(results: FirstAudioResults) -> str:
    base = pct(results.run(DEFAULT_SETUP), "first_audio")
    setups = (DEFAULT_SETUP, ESPEAK_SETUP, *OPTION_SETUPS)
    runs = [run for s in setups if (run := results.run(s)) is not None]
    return _render(_options(base), runs, lambda r: CHANGES[r.target.label])


def _share(part: float | None, whole: float | None) -> str:
    return "" if part is None or not whole else f" ({part / whole:.0%})"


def _vs(value: float, base: float) -> str:
    """``value`` beside ``base``, and the difference: true whatever they are."""
    return f"{value:.0f} ms against {base:.0f} ms ({value - base:+.0f})"


def _findings(results: FirstAudioResults) -> list[str]:
    default = results.run(DEFAULT_SETUP)
    assert default is not None
    fa, llm, tts = (pct(default, n) for n in ("first_audio", "llm_share", "tts_ttfb"))
    lines = [
        prose(
            "first-audio#shares",
            fa=ms(fa),
            llm=ms(llm),
            llm_share=_share(llm, fa),
            tts=ms(tts),
            tts_share=_share(tts, fa),
            added=ms(pct(default, "pipeline_added"), 2),
        )
    ]
    ideal, excess = pct(default, "ideal"), pct(default, "excess")
    if ideal is not None and excess is not None:
        side = "above" if excess >= 0 else "below"
        lines.append(prose("first-audio#limit", ideal=ideal, excess=abs(excess), side=side))
    alone = pct(default, "tts_alone")
    if tts is not None and alone is not None:
        lines.append(prose("first-audio#alone", cpus=results.cpus, vs=_vs(tts, alone)))
    off = results.run(NO_PRIORITY_SETUP)
    off_fa = pct(off, "first_audio")
    if off is not None and off_fa is not None and fa is not None:
        held, off_tts = pct(default, "llm_held"), pct(off, "tts_ttfb")
        if held is None:  # "auto" did not turn it on: there is no comparison to make
            lines.append(prose("first-audio#priority-off", vs=_vs(fa, off_fa)))
        else:
            lines.append(
                prose(
                    "first-audio#priority",
                    vs=_vs(fa, off_fa),
                    tts=""
                    if off_tts is None or tts is None
                    else f"; Piper's first byte {_vs(tts, off_tts)}",
                    held=held,
                    gaps_on=default.gaps()["turns"],
                    gaps_off=off.gaps()["turns"],
                )
            )
    for setup, engine, part, what in (
        (ONE_LLM_THREAD_SETUP, "llama.cpp", "llm_share", "its LLM share"),
        (ONE_TTS_THREAD_SETUP, "Piper", "tts_ttfb", "its first byte of the first piece"),
    ):
        run = results.run(setup)
        value, own, base = pct(run, "first_audio"), pct(run, part), pct(default, part)
        if value is not None and fa is not None and own is not None and base is not None:
            lines.append(
                prose(
                    "first-audio#threads",
                    engine=engine,
                    vs=_vs(value, fa),
                    what=what,
                    own=_vs(own, base),
                )
            )
    espeak = results.run(ESPEAK_SETUP)
    if espeak is not None and espeak.error is None:
        lines.append(
            prose(
                "first-audio#espeak",
                piper_first=ms(pct(default, "first_token")),
                espeak_first=ms(pct(espeak, "first_token")),
                piper_pace=ms(pct(default, "ms_per_token"), 1),
                espeak_pace=ms(pct(espeak, "ms_per_token"), 1),
            )
        )
    return lines


def _warm_up(default: TargetRun) -> str:
    warm_up = default.warm_ups[0] if default.warm_ups else None
    if warm_up is None or warm_up.report is None or default.open_s is None:
        return ""
    return prose(
        "first-audio#warm-up",
        open_s=default.open_s,
        first_token=ms(warm_up.report.stamps_ms["first_token"]),
        first_audio=ms(warm_up.report.first_audio_ms),
    )


def first_audio_section(results: FirstAudioResults) -> str:
    default, espeak = results.run(DEFAULT_SETUP), results.run(ESPEAK_SETUP)
    main = [run for run in (default, espeak) if run is not None]
    if not _measured(main):
        errors = [run.error for run in main if run.error] or ["no setup was run"]
        return unavailable(FIRST_AUDIO_TITLE, f"RuntimeError: {errors[0]}")
    warm_up = details = ""
    if default is not None and default.error is None:
        warm_up = _warm_up(default)
        details = prose(
            "first-audio#details",
            breakdown=_breakdown(_measured(main)),
            sessions=SESSIONS,
            options=_options_table(results),
            findings="\n".join(_findings(results)),
        )
    return prose(
        "first-audio",
        prompts=len(results.prompts),
        cpus=results.cpus,
        **_targets(results),
        figures=_render(FIGURES, main, lambda r: r.target.label),
        warm_up=warm_up,
        details=details,
        method=_method(results),
    )


def _method(results: FirstAudioResults) -> str:
    files = (PIPELINE_DEFAULT, PIPELINE_ESPEAK)
    temperature = dict.fromkeys(f"{load_pipeline(p).llm.temperature:g}" for p in files)
    return prose(
        "first-audio#method",
        warm_up=quoted(WARM_UP_PROMPT),
        temperature=", ".join(temperature),
        max_tokens=MAX_TOKENS,
        seed=SEED,
        rate=SPEAKER_RATE,
        gap_s=GAP_S,
        sessions=SESSIONS,
        prompts="; ".join(quoted(p) for p in results.prompts),
        cpus=results.cpus,
        load_before=results.load_before,
        load_after=results.load_after,
        seconds=results.seconds,
    )


SCENARIO = Scenario(
    "first-audio",
    (FIRST_AUDIO_TITLE,),
    run_first_audio_bench,
    lambda r: [first_audio_section(r)],
    True,
)

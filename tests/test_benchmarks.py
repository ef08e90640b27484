"""The benchmarks stay runnable, and their corpus doubles as a correctness check.

No timing is asserted here: speed is reported by `make bench`, not tested.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest

from benchmarks import first_audio
from benchmarks.chunker import run_corpus
from benchmarks.first_audio import (
    DEFAULT_SETUP,
    ESPEAK_SETUP,
    MAX_TOKENS,
    NO_PRIORITY_SETUP,
    ONE_LLM_THREAD_SETUP,
    ONE_TTS_THREAD_SETUP,
    OPTION_SETUPS,
    SEED,
    TWO_WORDS_SETUP,
    FirstAudioResults,
    Setup,
)
from benchmarks.first_audio_report import FIRST_AUDIO_TITLE, first_audio_section
from benchmarks.membrane import (
    MEMBRANE_TITLE,
    VENDORS,
    membrane_section,
    method_paragraph,
    run_membrane_bench,
)
from benchmarks.parser import run_parser_bench
from benchmarks.replies import REPLIES
from benchmarks.tokens import tokenize
from benchmarks.tts import ENGINES, TTS_TITLE, run_tts_engines_bench, tts_section
from voice_membrane.bench.membrane_consumers import CONSUMERS
from voice_membrane.bench.request_cost import LENGTHS, conversation, one_call
from voice_membrane.bench.runner import Target, TargetRun, TurnSample
from voice_membrane.chunking import SpeechChunker
from voice_membrane.pipeline.metrics import TurnMetrics
from voice_membrane.vocab.messages import ModelConfig


def test_corpus_is_large_enough_and_its_hazards_are_real() -> None:
    assert len(REPLIES) >= 50
    for reply in REPLIES:
        assert "".join(tokenize(reply.text)) == reply.text
        reply.hazard_spans()  # raises if a hazard is not in its reply


def test_chunker_never_splits_a_hazard_in_the_corpus_fed_token_by_token() -> None:
    for run in run_corpus(SpeechChunker, REPLIES):
        assert run.hazard_cuts == (), (run.reply.text, run.pieces)
        assert not run.bad_offsets and not run.content_changed, run.reply.text
        assert run.unspeakable == (), (run.reply.text, run.pieces)  # no markup, URL, emoji
        assert not run.first_by_flush, run.reply.text


def test_parser_benchmark_runs_and_checks_its_output() -> None:
    results = run_parser_bench(target_chars=20_000, repeats=1)
    assert results.seen_blocks == results.generated_blocks
    assert all(v.feeds > 0 for v in results.variants)


def test_membrane_benchmark_runs_every_vendor_and_renders_a_row_each() -> None:
    # A tiny reply and one repetition: the outputs are checked inside the run (a
    # consumer that loses the scripted blocks raises), the numbers are not.
    results = run_membrane_bench(
        text_chars=120, thinking_chars=40, repeats=1, send_calls=3, send_repeats=2
    )
    modes = [(case.vendor, case.mode) for case in results.cases]
    assert modes == [*((vendor, "chat") for vendor in VENDORS), ("anthropic", "prefill")]
    for case in results.cases:
        assert case.deltas > 10
        assert all(len(case.seconds[c]) == 1 for c in CONSUMERS)
    assert [p.component for p in results.in_process] == [
        *["NativeBlockAssembler"] * len(VENDORS),
        "XmlStreamParser",
    ]
    section = membrane_section(results)
    assert section.startswith(f"## {MEMBRANE_TITLE}")
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    for case in results.cases:
        assert sum(line.startswith(f"| {case.label} |") for line in rows) == 1, case.label
    assert section.count("\n- ") >= 3  # the findings
    assert "child process" in method_paragraph(results)
    sent = [(cost.vendor, cost.messages) for cost in results.before_send]
    assert sent == [(vendor, n) for vendor in VENDORS for n in LENGTHS]
    assert all(len(cost.us) == 2 and min(cost.us) > 0 for cost in results.before_send)
    assert "Before the first byte" in section
    for vendor in VENDORS:
        assert sum(line.startswith(f"| {vendor} |") for line in rows) == 1, vendor


def test_a_call_that_never_reaches_the_transport_fails_the_request_cost() -> None:
    class GivesUp:  # an adapter that ends its stream without sending anything
        name = "gives-up"

        async def stream(self, built: Any, config: Any) -> AsyncIterator[Any]:
            return
            yield

    with pytest.raises(RuntimeError, match="never reached the transport"):
        anyio.run(one_call, GivesUp(), conversation(3), ModelConfig(model="m"))


def test_tts_benchmark_runs_every_cloud_engine_and_renders_a_row_each() -> None:
    # Two turns each against the fakes: every engine speaks and is measured; the
    # numbers are not checked.
    results = run_tts_engines_bench(turns=2, warmup=1, log=lambda line: None)
    assert [r.engine for r in results.results] == list(ENGINES)
    for result in results.results:
        assert result.errors == [], result.engine
        assert len(result.raw_ms) == len(result.pipeline_ms) == 2, result.engine
        assert result.first_piece and len(result.added_ms()) == 2
    section = tts_section(results)
    assert section.startswith(f"## {TTS_TITLE}")
    for engine in ENGINES:
        assert sum(line.startswith(f"| `{engine}` |") for line in section.splitlines()) == 1


def test_first_audio_setups_are_the_shipped_pipelines_with_one_change_each() -> None:
    default = DEFAULT_SETUP.target().config
    assert default is not None
    assert default.llm.spec == "local" and default.tts.spec == "piper"
    assert (default.llm.max_tokens, default.llm.seed) == (MAX_TOKENS, SEED)
    assert (default.sink.kind, default.sink.realtime) == ("null", False)
    assert default.scheduling.first_audio_priority == "auto"
    espeak = ESPEAK_SETUP.target().config
    assert espeak is not None and espeak.tts.spec == "espeak" and espeak.llm.seed == SEED
    base = default.model_dump()
    for setup in OPTION_SETUPS:
        config = setup.target().config
        assert config is not None and setup.option
        changed = {
            (section, key)
            for section, values in config.model_dump().items()
            if isinstance(values, dict)
            for key, value in values.items()
            if base[section][key] != value
        }
        assert changed == {(section, key) for section, key, _ in setup.change}


def ns(ms: float) -> int:
    return round(ms * 1e6)


def _turn(
    prompt: str,
    session: int,
    first_audio: float,
    *,
    llm_share: float = 100.0,
    held: float | None = 40.0,
    gap_ms: float = 0.0,
) -> TurnSample:
    """A counted turn whose report has the given figures (ms); 6 LLM deltas from
    first token at 50 ms to the one that released the first piece."""
    metrics = TurnMetrics(started_ns=0)
    tts_request = llm_share + 0.5
    for name, at in (
        ("first_token", 50.0),
        ("first_visible", 50.0),
        ("first_chunk", llm_share),
        ("tts_request", tts_request),
        ("tts_first_byte", first_audio - 1.0),
        ("first_audio", first_audio),
    ):
        metrics.stamp(name, ns(at))
    metrics.first_chunk_token_ns = ns(llm_share)
    metrics.token_ns = [ns(50.0 + k * (llm_share - 50.0) / 5) for k in range(6)] + [ns(900.0)]
    metrics.gaps, metrics.gap_ns = (1, ns(gap_ms)) if gap_ms else (0, 0)
    metrics.llm_held_ns = None if held is None else ns(held)
    report = metrics.report(llm="local:model", tts="piper", sink="null")
    return TurnSample(prompt, session, False, report, None, first_piece="Sure, the weather")


def _run(setup: Setup, first_audio: Sequence[float], **figures: Any) -> TargetRun:
    run = TargetRun(setup.target(), "local:model", "piper", sessions=2, open_s=0.8)
    run.turns = [_turn(f"p{i}", i % 2, ms, **figures) for i, ms in enumerate(first_audio)]
    run.warm_ups = [_turn("hi", 0, 400.0)]
    run.tts_alone_ms = [60.0, 62.0, 58.0]
    return run


def _cells(section: str, starts: str) -> list[str]:
    (line,) = [line for line in section.splitlines() if line.startswith(f"| {starts}")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_first_audio_report_renders_targets_options_and_findings_from_the_runs() -> None:
    runs = {
        DEFAULT_SETUP: _run(DEFAULT_SETUP, [300.0, 320.0, 280.0, 400.0]),
        ESPEAK_SETUP: _run(ESPEAK_SETUP, [100.0, 110.0, 105.0, 115.0]),
        NO_PRIORITY_SETUP: _run(NO_PRIORITY_SETUP, [350.0, 370.0, 330.0, 450.0], held=None),
        ONE_LLM_THREAD_SETUP: _run(ONE_LLM_THREAD_SETUP, [310.0, 330.0, 290.0, 410.0]),
        ONE_TTS_THREAD_SETUP: TargetRun(ONE_TTS_THREAD_SETUP.target(), error="no voice here"),
        TWO_WORDS_SETUP: _run(TWO_WORDS_SETUP, [250.0, 260.0, 240.0, 380.0], gap_ms=40.0),
    }
    results = FirstAudioResults(
        setups=list(runs),
        runs=list(runs.values()),
        load_before=0.5,
        load_after=1.5,
        seconds=90.0,
        cpus=2,
        prompts=["p0", "p1", "p2", "p3"],
    )
    section = first_audio_section(results)
    assert section.startswith(f"## {FIRST_AUDIO_TITLE}")
    # Nearest-rank p50 of 280, 300, 320, 400 is 300; p95 400. Ideal: 100 + 60 per turn.
    p50 = _cells(section, "the embedded default reaches first audio")
    assert p50[1:] == [f"{DEFAULT_SETUP.label}: 300 ms (engine-alone limit 160)", "**missed**"]
    p95 = _cells(section, "… and ≤")
    assert p95[1:] == [f"{DEFAULT_SETUP.label}: 400 ms (engine-alone limit 160)", "**missed**"]
    assert _cells(section, "the espeak pipeline")[2] == "**met**"
    underrun = _cells(section, "no underrun")
    assert underrun[1:] == [f"{TWO_WORDS_SETUP.label}: 4 (160 ms)", "**missed**"]
    assert _cells(section, "the pipeline adds")[2] == "**met**"
    # What moves first-audio latency: Δ vs default, the hold only where priority is on.
    none = _cells(section, "none: `pipelines/local.toml`")
    assert none[1:6] == ["4 (0)", "300", "280 / 320", "400", "—"] and none[8] == "40"
    off = _cells(section, NO_PRIORITY_SETUP.option.replace("|", "\\|"))
    assert off[2] == "350" and off[5] == "+50" and off[8] == "—"
    assert _cells(section, TWO_WORDS_SETUP.option)[5] == "-50"
    assert _cells(section, ONE_TTS_THREAD_SETUP.option)[1] == "not run: no voice here"
    # Figures: the engine alone (the run's median: no turn was timed alone) and the deltas.
    figures = _cells(section, f"{DEFAULT_SETUP.label} (`local:model`")
    assert figures[3] == "160 / 160" and figures[6] == "60 / 60" and figures[8] == "6"
    findings = [line for line in section.splitlines() if line.startswith("- ")]
    assert any("300 ms against 350 ms (-50)" in line for line in findings)  # on vs off
    assert any("llama.cpp on one thread" in line and "(+10)" in line for line in findings)
    assert not any("Piper on one thread" in line for line in findings)  # it did not run
    assert "`make bench` runs the `voice-membrane bench` command's engine" in section
    assert "warm-up turn, the first after start, reached first token in 50 ms" in section


def test_first_audio_setups_take_turns_in_sessions_and_merge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each session is its own event loop; record the order instead of running engines.
    calls: list[tuple[str, list[str]]] = []

    async def session(target: Target, prompts: Sequence[str]) -> TargetRun:
        calls.append((target.label, list(prompts)))
        run = TargetRun(target, "llm", "tts", sessions=1)
        if target.label == "b":
            run.error = "cannot start"
        run.turns = [TurnSample(p, 0, False, None, None) for p in prompts]
        return run

    monkeypatch.setattr(first_audio, "_session", session)
    targets = [Target(label, None) for label in ("a", "b", "c")]
    runs = first_audio.run_targets(targets, ["p0", "p1", "p2", "p3", "p4"], sessions=2)
    assert calls == [
        ("a", ["p0", "p2", "p4"]),
        ("b", ["p0", "p2", "p4"]),
        ("c", ["p0", "p2", "p4"]),
        ("c", ["p1", "p3"]),  # the second round in reverse; "b" not tried again
        ("a", ["p1", "p3"]),
    ]
    a, b, c = runs
    assert [(t.prompt, t.session) for t in a.turns] == [
        ("p0", 0),
        ("p2", 0),
        ("p4", 0),
        ("p1", 1),
        ("p3", 1),
    ]
    assert a.sessions == c.sessions == 2 and a.error is None
    assert b.error == "cannot start" and b.sessions == 1

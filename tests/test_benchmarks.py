"""The benchmarks stay runnable, and their corpus doubles as a correctness check.

No timing is asserted here: speed is reported by `make bench`, not tested.
"""

from __future__ import annotations

from benchmarks.bench_chunker import run_corpus
from benchmarks.bench_membrane import CONSUMERS, VENDORS, run_membrane_bench
from benchmarks.bench_parser import run_parser_bench
from benchmarks.bench_serve_load import run_serve_load_bench
from benchmarks.bench_tts_engines import ENGINES, run_tts_engines_bench
from benchmarks.replies import REPLIES
from benchmarks.report_membrane import MEMBRANE_TITLE, membrane_section, method_paragraph
from benchmarks.report_serve import SERVE_TITLE, serve_section
from benchmarks.report_tts import TTS_TITLE, tts_section
from benchmarks.tokens import tokenize
from voice_membrane.chunking import SpeechChunker


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
    results = run_membrane_bench(text_chars=120, thinking_chars=40, repeats=1)
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


def test_serve_load_benchmark_runs_and_renders_a_row_per_size() -> None:
    # Two sessions, one turn each: the fakes, the server and a client process all run;
    # the turns must have played audio without an error. Numbers are not checked.
    results = run_serve_load_bench(levels=(2,), turns=1, ramp_s=0.2, log=lambda _: None)
    (level,) = results.levels
    assert level.sessions == 2 and len(level.turns) == 2
    assert level.error_count() == 0, (level.errors, [t.errors for t in level.turns])
    for turn in level.turns:
        assert turn.first_audio_ms is not None and turn.frames > 10 and turn.audio_s > 1
        assert turn.server.get("first_audio") is not None
    assert results.ideal.first_piece and results.ideal.first_audio_ms > 400
    section = serve_section(results)
    assert section.startswith(f"## {SERVE_TITLE}")
    rows = [line for line in section.splitlines() if line.startswith("| 2 |")]
    assert len(rows) == 2  # the load table and the stage table
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[:2] == ["2", "2"] and cells[5] == "0"  # sessions, turns, errors

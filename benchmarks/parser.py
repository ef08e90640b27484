"""Parser benchmark: ``XmlStreamParser`` throughput on a ~1 MB mixed prefill-mode
stream fed in three patterns, each run's output checked against what was generated
(so a parser that drops or mangles text cannot post a fast number); its section,
``parser_section``, words the method (``sections/parser.md``)."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.parser_stream import DEFAULT_TARGET_CHARS, MixedStream, build_stream
from benchmarks.prose import prose, title
from benchmarks.scenario import Scenario
from benchmarks.table import Column, Table, table
from voice_membrane.bench.stats import span
from voice_membrane.vocab.events import BlockStart, Chunk, Event

TOKEN_CHARS = 4
LARGE_FEED_CHARS = 64 * 1024
REPEATS = 5
BLANK_TEXT = "text, whitespace only"  # counted apart: such blocks carry nothing to speak


class ParserOutputError(RuntimeError):
    """The parser's output does not match the generated stream; its timing is void."""


@dataclass(frozen=True, slots=True)
class VariantResult:
    label: str
    feeds: int  # feed() calls per run
    seconds: tuple[float, ...]  # one per repeat, flush() included


@dataclass(frozen=True, slots=True)
class ParserResults:
    megabytes: float  # UTF-8 size of the stream, 10**6 bytes
    chars_by_kind: dict[str, int]
    generated_blocks: dict[str, int]
    seen_blocks: dict[str, int]  # BlockStart counts (and BLANK_TEXT) from the last run
    variants: list[VariantResult]
    hostile: VariantResult  # HOSTILE_FEED in one feed (a "<" every other character)


# Untrusted text dense with "<" that never closes: each "<" may look for its ">"
# only as far as the longest tag, or one such feed costs time quadratic in its size.
HOSTILE_FEED = "a<" * 200_000


def _normalized(texts: Sequence[str]) -> str:
    # Whitespace around tags is wire format and the parser may trim it; words may not move.
    return " ".join(" ".join(texts).split())


def generated_blocks(stream: MixedStream) -> dict[str, int]:
    return {
        "text": len(stream.text_blocks),
        "thinking": len(stream.thinking_blocks),
        "tool_call": stream.invokes,
        "tool_result": stream.results,
    }


def check_output(events: Sequence[Event], stream: MixedStream) -> dict[str, int]:
    """Raise ``ParserOutputError`` unless the events carry the generated text and blocks;
    return the blocks seen, by type."""
    by_block: dict[int, list[str]] = {}
    thinking_indices: list[int] = []
    spoken: list[str] = []
    seen: dict[str, int] = {}
    for event in events:
        if isinstance(event, Chunk):
            by_block.setdefault(event.meta.block_index, []).append(event.text)
            if event.meta.visible:
                spoken.append(event.text)
        elif isinstance(event, BlockStart):
            seen[event.type] = seen.get(event.type, 0) + 1
            if event.type == "thinking":
                thinking_indices.append(event.index)
        elif event.block.type == "text" and not (event.block.content or "").strip():
            seen[BLANK_TEXT] = seen.get(BLANK_TEXT, 0) + 1
    if any(
        event.meta.visible != (event.meta.type == "text")
        for event in events
        if isinstance(event, Chunk)
    ):
        raise ParserOutputError("a chunk's visibility does not match its block type")
    # The visible chunks as they come, joined with nothing: up to whitespace runs they
    # must be the stream's top-level text, so a lost separator (two words merged
    # across hidden blocks) fails the run.
    if _normalized(["".join(spoken)]) != _normalized([stream.top_level_text]):
        raise ParserOutputError("visible text differs from the stream's top-level text")
    thought = ["".join(by_block.get(index, [])) for index in thinking_indices]
    if _normalized(thought) != _normalized(stream.thinking_blocks):
        raise ParserOutputError("thinking text differs from the generated thinking blocks")
    if seen != generated_blocks(stream):
        raise ParserOutputError(f"blocks seen {seen} differ from those generated")
    return seen


def _timed_run(pieces: Sequence[str]) -> tuple[float, list[Event]]:
    from voice_membrane.parse import XmlStreamParser

    parser = XmlStreamParser()
    events: list[Event] = []
    feed, keep = parser.feed, events.extend  # bound once: the loop is what is measured
    # As timeit does: a GC pass landing in one repeat would only add noise.
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for piece in pieces:
            keep(feed(piece))
        keep(parser.flush())
        elapsed = time.perf_counter_ns() - start
    finally:
        gc.enable()
    return elapsed / 1e9, events


def _run_variant(
    label: str, pieces: Sequence[str], stream: MixedStream, repeats: int
) -> tuple[VariantResult, dict[str, int]]:
    seconds: list[float] = []
    seen: dict[str, int] = {}
    for _ in range(repeats):
        elapsed, events = _timed_run(pieces)
        seen = check_output(events, stream)
        seconds.append(elapsed)
    return VariantResult(label, len(pieces), tuple(seconds)), seen


def run_parser_bench(
    target_chars: int = DEFAULT_TARGET_CHARS, repeats: int = REPEATS
) -> ParserResults:
    # The stream ends inside a cut </function_calls> on purpose: the parser's warning
    # about it, once a run, is expected and would only clutter the output.
    log = logging.getLogger("voice_membrane.parse.xml_stream")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        return _run_parser_bench(target_chars, repeats)
    finally:
        log.setLevel(level)


def _run_parser_bench(target_chars: int, repeats: int) -> ParserResults:
    stream = build_stream(target_chars)
    wire = stream.wire
    tokens = [wire[i : i + TOKEN_CHARS] for i in range(0, len(wire), TOKEN_CHARS)]
    per_block = [block for _, block in stream.blocks]
    large_feeds = [wire[i : i + LARGE_FEED_CHARS] for i in range(0, len(wire), LARGE_FEED_CHARS)]

    small, seen = _run_variant(f"{TOKEN_CHARS}-char tokens", tokens, stream, repeats)
    blocks, _ = _run_variant("one feed per block", per_block, stream, repeats)
    large, _ = _run_variant(f"{LARGE_FEED_CHARS // 1024} KB feeds", large_feeds, stream, repeats)

    hostile_seconds: list[float] = []
    for _ in range(repeats):
        elapsed, events = _timed_run([HOSTILE_FEED])
        spoken = "".join(e.text for e in events if isinstance(e, Chunk) and e.meta.visible)
        if spoken != HOSTILE_FEED:
            raise ParserOutputError("the hostile feed did not come back as visible text")
        hostile_seconds.append(elapsed)

    return ParserResults(
        megabytes=len(wire.encode("utf-8")) / 1e6,
        chars_by_kind=stream.chars_by_kind(),
        generated_blocks=generated_blocks(stream),
        seen_blocks=seen,
        variants=[small, blocks, large],
        hostile=VariantResult("`a<` times 200,000, one feed", 1, tuple(hostile_seconds)),
    )


PARSER_TITLE = title("parser")
BLOCK_KINDS = ("text", "thinking", "tool_call", "tool_result")


def parser_section(results: ParserResults) -> str:
    total = sum(results.chars_by_kind.values())
    shares = ", ".join(
        f"{kind} {results.chars_by_kind.get(kind, 0) / total:.0%}" for kind in BLOCK_KINDS
    )
    timing: Table[VariantResult] = Table(
        [
            Column("Feeding", lambda v: v.label),
            Column("feed() calls", lambda v: f"{v.feeds:,}"),
            Column(
                "MB/s, median (min to max)",
                lambda v: span([results.megabytes / s for s in v.seconds], 1),
            ),
            Column(
                "µs per feed(), median (min to max)",
                lambda v: span([s * 1e6 / v.feeds for s in v.seconds], 2),
            ),
        ]
    )
    blocks = table(
        ["Block type", "generated", "reported by the parser"],
        [
            [kind, results.generated_blocks.get(kind, 0), results.seen_blocks.get(kind, 0)]
            for kind in (*BLOCK_KINDS, BLANK_TEXT)
        ],
    )
    return prose(
        "parser",
        megabytes=results.megabytes,
        shares=shares,
        token_chars=TOKEN_CHARS,
        large_kb=LARGE_FEED_CHARS // 1024,
        timing=timing.render(results.variants),
        hostile=results.hostile.label,
        hostile_kb=len(HOSTILE_FEED) / 1e3,
        hostile_ms=span([s * 1e3 for s in results.hostile.seconds], 1),
        blocks=blocks,
    )


SCENARIO = Scenario("parser", (PARSER_TITLE,), run_parser_bench, lambda r: [parser_section(r)])

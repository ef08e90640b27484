"""The Membrane-cost measurement: what the adapters and ``Membrane`` add per
streamed delta over each vendor's SDK, against the fakes.

Each vendor's fake (in a child process, ``fakes``, so this process does only the
client's work) plays one long scripted reply (``membrane_reply``) cut into
deltas, no delays, and each consumer (``membrane_consumers``: ``sdk``, the SDK
alone, the floor; ``adapter``; ``membrane``; ``membrane_single``, no ready
deltas joined) reads it to the end, in chat mode per vendor and prefill mode
(``anthropic-xml``) for Anthropic. The consumers take turns within a repetition
(the order rotates), so added costs come from pairs of runs made one after the
other (``CaseResult.added``). The heap left by imports and warm-up is frozen
(``gc.freeze``): no full collection of the SDKs' modules lands in one run.
Beside it, the parser or assembler alone, fed what Membrane feeds it. Every
run's blocks are checked, so a consumer that drops text cannot post a fast number.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ..vocab.provider_output import ProviderOutput
from .fakes import fakes_process
from .membrane_consumers import (
    CONSUMERS,
    adapter,
    adapter_items,
    assemble,
    membrane_run,
    parse,
    request_for,
    sdk_reader,
)
from .membrane_reply import (
    FUNCTION_CALLS_END,
    LongReply,
    MembraneOutputError,
    Mode,
    check_blocks,
    membrane_fakes,
)
from .request_cost import RequestCost
from .stats import median, median_min_max

SDK_DISTRIBUTIONS = ("anthropic", "openai", "google-genai")


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One vendor and mode over loopback HTTP: seconds per run of each consumer."""

    vendor: str
    mode: Mode
    formatter: str
    deltas: int  # items of the SDK's stream per reply (one per SSE event / chunk)
    seconds: dict[str, tuple[float, ...]]  # consumer → one per repetition
    cpu_seconds: dict[str, tuple[float, ...]]  # the same runs' CPU time of this thread
    parse_ns: tuple[int, ...]  # Membrane.parse_ns of each timed membrane_single run

    @property
    def label(self) -> str:
        return f"{self.vendor}, {self.mode} (`{self.formatter}`)"

    def us_per_delta(self, consumer: str) -> tuple[float, float, float]:
        """(median, min, max) wall-clock microseconds per delta."""
        return median_min_max([s * 1e6 / self.deltas for s in self.seconds[consumer]])

    def added(self, upper: str, lower: str) -> tuple[float, float, float]:
        """(median, min, max) µs per delta that ``upper`` adds over ``lower``.

        Paired by repetition, as a ratio: the machine's speed drifts over seconds and
        scales both runs of a pair alike, which a ratio cancels and a difference does
        not. Each repetition's ``upper / lower - 1`` is taken times ``lower``'s median.
        """
        pairs = zip(self.seconds[upper], self.seconds[lower], strict=True)
        base = self.us_per_delta(lower)[0]
        return median_min_max([(high / low - 1.0) * base for high, low in pairs if low > 0])

    def slower_in(self, upper: str, lower: str) -> int:
        """In how many repetitions ``upper`` took longer than ``lower``."""
        pairs = zip(self.seconds[upper], self.seconds[lower], strict=True)
        return sum(high > low for high, low in pairs)

    def parse_us_per_delta(self) -> tuple[float, float, float]:
        """What Membrane timed inside its parser or assembler (``parse_ns``), per delta."""
        return median_min_max([ns / 1e3 / self.deltas for ns in self.parse_ns])

    def busy_share(self) -> float:
        """Median share of the wall time this thread spent on the CPU: near 1, the
        client was busy throughout (the server kept ahead); lower, it also waited."""
        shares = [
            cpu / wall
            for consumer in CONSUMERS
            for cpu, wall in zip(self.cpu_seconds[consumer], self.seconds[consumer], strict=True)
            if wall > 0
        ]
        return median(shares) if shares else 0.0


@dataclass(frozen=True, slots=True)
class InProcessResult:
    """A parser or assembler fed one reply's items: no HTTP, no event loop."""

    component: str  # "NativeBlockAssembler" or "XmlStreamParser"
    case: str  # the CaseResult.label whose (membrane_single - adapter) this is part of
    feeds: int  # feed() calls per run
    deltas: int  # that case's deltas: the per-delta figures share its denominator
    seconds: tuple[float, ...]

    def us_per_delta(self) -> tuple[float, float, float]:
        return median_min_max([s * 1e6 / self.deltas for s in self.seconds])


@dataclass(frozen=True, slots=True)
class MembraneResults:
    text_chars: int
    thinking_chars: int
    xml_chars: int
    delta_chars: int  # the deltas' size, as the fakes cut the reply
    repeats: int
    cases: list[CaseResult]
    in_process: list[InProcessResult]
    sdk_versions: dict[str, str]  # distribution → version
    seconds: float  # the whole benchmark
    # Before the first byte: each adapter's stream() to its request's hand-over
    # (``request_cost``), by conversation length; filled by the caller.
    before_send: tuple[RequestCost, ...] = ()

    def part_of(self, case: CaseResult) -> InProcessResult | None:
        return next((p for p in self.in_process if p.case == case.label), None)


async def _run_case(
    vendor: str, mode: Mode, base_url: str, reply: LongReply, repeats: int
) -> tuple[CaseResult, list[ProviderOutput]]:
    """Every consumer once to warm up, then ``repeats`` timed rounds."""
    formatter = "native" if mode == "chat" else "anthropic-xml"
    request, where = request_for(vendor), f"{vendor} ({mode})"
    provider = adapter(vendor, base_url)
    sdk_run, sdk_close = sdk_reader(vendor, base_url, request, formatter)
    seconds: dict[str, list[float]] = {c: [] for c in CONSUMERS}
    cpu_seconds: dict[str, list[float]] = {c: [] for c in CONSUMERS}
    parse_ns: list[int] = []
    counts: set[int] = set()
    items: list[ProviderOutput] = []

    async def one(consumer: str, timed: bool) -> None:
        nonlocal items
        gc.collect()  # what the previous run left is not this run's to collect
        cpu, start = time.thread_time(), time.perf_counter_ns()
        if consumer == "sdk":
            counts.add(await sdk_run())
        elif consumer == "adapter":
            items = await adapter_items(provider, request, formatter)
        else:
            single = consumer == "membrane_single"
            blocks, ns = await membrane_run(provider, request, formatter, one_at_a_time=single)
        elapsed, cpu = (time.perf_counter_ns() - start) / 1e9, time.thread_time() - cpu
        # Checked after the clock stops.
        if len(counts) > 1:
            raise MembraneOutputError(f"{where}: the SDK read {sorted(counts)} items")
        if consumer == "adapter" and mode == "chat":
            check_blocks(assemble(items)[1], reply, f"{where}, adapter")
        elif consumer.startswith("membrane"):
            check_blocks(blocks, reply, f"{where}, Membrane")
        if timed:
            seconds[consumer].append(elapsed)
            cpu_seconds[consumer].append(cpu)
            if consumer == "membrane_single":  # (fed as the parts alone are)
                parse_ns.append(ns)

    try:
        for consumer in CONSUMERS:  # warm-up: connections, lazy imports, caches
            await one(consumer, timed=False)
        gc.freeze()  # and what the warm-up left (clients, caches)
        for repetition in range(repeats):
            shift = repetition % len(CONSUMERS)
            for consumer in CONSUMERS[shift:] + CONSUMERS[:shift]:
                await one(consumer, timed=True)
    finally:
        await provider.aclose()
        await sdk_close()
    (deltas,) = counts
    if deltas == 0:
        raise MembraneOutputError(f"{where}: the SDK read no stream items")
    result = CaseResult(
        vendor=vendor,
        mode=mode,
        formatter=formatter,
        deltas=deltas,
        seconds={c: tuple(v) for c, v in seconds.items()},
        cpu_seconds={c: tuple(v) for c, v in cpu_seconds.items()},
        parse_ns=tuple(parse_ns),
    )
    return result, items


def _in_process(
    case: CaseResult, items: Sequence[ProviderOutput], reply: LongReply, repeats: int
) -> InProcessResult:
    """The assembler fed the adapter's items (chat), or the parser fed the XML in
    pieces and the stop sequence written back, as Membrane feeds it (prefill)."""
    if case.mode == "chat":
        component, feeds = "NativeBlockAssembler", len(items)
        runs = [assemble(items) for _ in range(repeats)]
    else:
        from ..formats import get_formatter

        component = "XmlStreamParser"
        prefill = get_formatter(case.formatter).build(request_for(case.vendor)).prefill or ""
        pieces = [*reply.xml_pieces(), FUNCTION_CALLS_END]
        feeds = len(pieces)
        runs = [parse(pieces, prefill) for _ in range(repeats)]
    for _, blocks in runs:
        check_blocks(blocks, reply, f"{component} ({case.label})")
    return InProcessResult(component, case.label, feeds, case.deltas, tuple(s for s, _ in runs))


async def _run_all(
    reply: LongReply, repeats: int, vendors: Sequence[str]
) -> tuple[list[CaseResult], list[InProcessResult]]:
    cases: list[tuple[str, Mode]] = [(vendor, "chat") for vendor in vendors]
    if "anthropic" in vendors:
        cases.append(("anthropic", "prefill"))
    results: list[CaseResult] = []
    in_process: list[InProcessResult] = []
    spec = {"cases": cases, "reply": asdict(reply), "replies": len(CONSUMERS) * (repeats + 1)}
    with fakes_process(membrane_fakes, spec) as fakes:
        # Imported while the servers start, before any clock: a missing SDK reports
        # this benchmark as not run (ImportError), and no import lands in a timed run.
        import anthropic  # noqa: F401
        import openai  # noqa: F401
        from google import genai  # noqa: F401

        urls = fakes.urls()
        gc.collect()
        gc.freeze()  # the modules' objects: no collection need walk them again
        try:
            for index, (vendor, mode) in enumerate(cases):
                case, items = await _run_case(vendor, mode, urls[str(index)], reply, repeats)
                results.append(case)
                in_process.append(_in_process(case, items, reply, repeats))
        finally:
            gc.unfreeze()
    return results, in_process


def run_membrane_cost(reply: LongReply, repeats: int, vendors: Sequence[str]) -> MembraneResults:
    """Every case of ``vendors`` (chat mode each, prefill mode for Anthropic),
    ``repeats`` timed runs of each consumer after one warm-up run."""
    started = time.perf_counter()
    cases, in_process = asyncio.run(_run_all(reply, repeats, vendors))
    return MembraneResults(
        text_chars=len(reply.text),
        thinking_chars=len(reply.thinking),
        xml_chars=len(reply.xml),
        delta_chars=reply.delta_chars,
        repeats=repeats,
        cases=cases,
        in_process=in_process,
        sdk_versions={name: _version(name) for name in SDK_DISTRIBUTIONS},
        seconds=time.perf_counter() - started,
    )


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"

"""The Membrane-cost measurement: what the adapters and ``Membrane`` add per
streamed delta over each vendor's SDK, against the fakes.

Each vendor's fake server plays one long scripted reply (``membrane_reply``) cut
into deltas, no delays, and four consumers (``membrane_consumers``) read it to
the end: ``sdk``, the official SDK alone iterating its raw stream (the floor);
``adapter``, our provider adapter's ``stream()``, to its last
``ProviderOutput``; ``membrane``, ``Membrane(adapter, formatter).stream(request)``,
to its ``ReplyResult``; ``membrane_single``, the same with no ready deltas
joined (each delta's whole path, as when deltas arrive one by one). Chat mode
(formatter ``native``) per vendor, and prefill mode (``anthropic-xml``, the
same reply written as XML text) for Anthropic. The
four take turns within a repetition (the order rotates between repetitions),
so the added costs come from pairs of runs made one after the other
(``CaseResult.added``).

The fake servers run in a child process (``fakes``), as a real API is
elsewhere: this process does only the client's work, so the wall time per delta
is what reading the stream costs the client (the servers, with nothing to wait
for, keep ahead of it). Garbage collection stays on, but the heap left by
imports and warm-up is frozen (``gc.freeze``), so a full collection of the SDKs'
modules cannot land in one run.

Beside it, the pure in-process cost, without HTTP or event loop:
``NativeBlockAssembler`` fed the items an adapter yielded, and ``XmlStreamParser``
fed the XML reply in pieces, as Membrane feeds them.

Every run's output is checked (the blocks that come out must be the scripted
ones), so a consumer that drops text cannot post a fast number.
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
from .stats import median

SDK_DISTRIBUTIONS = ("anthropic", "openai", "google-genai")


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    return median(values), min(values), max(values)


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
        return _spread([s * 1e6 / self.deltas for s in self.seconds[consumer]])

    def added(self, upper: str, lower: str) -> tuple[float, float, float]:
        """(median, min, max) µs per delta that ``upper`` adds over ``lower``.

        Paired by repetition, as a ratio: the machine's speed drifts over seconds and
        scales both runs of a pair alike, which a ratio cancels and a difference does
        not. Each repetition's ``upper / lower - 1`` is taken times ``lower``'s median.
        """
        pairs = zip(self.seconds[upper], self.seconds[lower], strict=True)
        base = self.us_per_delta(lower)[0]
        return _spread([(high / low - 1.0) * base for high, low in pairs if low > 0])

    def slower_in(self, upper: str, lower: str) -> int:
        """In how many repetitions ``upper`` took longer than ``lower``."""
        pairs = zip(self.seconds[upper], self.seconds[lower], strict=True)
        return sum(high > low for high, low in pairs)

    def parse_us_per_delta(self) -> tuple[float, float, float]:
        """What Membrane timed inside its parser or assembler (``parse_ns``), per delta."""
        return _spread([ns / 1e3 / self.deltas for ns in self.parse_ns])

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
        return _spread([s * 1e6 / self.deltas for s in self.seconds])


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


# --------------------------------------------------------------------------- one case


@dataclass
class _Timings:
    seconds: dict[str, list[float]]
    cpu: dict[str, list[float]]
    parse_ns: list[int]


async def _run_case(
    vendor: str, mode: Mode, base_url: str, reply: LongReply, repeats: int
) -> tuple[CaseResult, list[ProviderOutput]]:
    formatter = "native" if mode == "chat" else "anthropic-xml"
    request = request_for(vendor)
    where = f"{vendor} ({mode})"
    provider = adapter(vendor, base_url)
    sdk_run, sdk_close = sdk_reader(vendor, base_url, request, formatter)
    timings = _Timings({c: [] for c in CONSUMERS}, {c: [] for c in CONSUMERS}, [])
    deltas = 0
    items: list[ProviderOutput] = []

    async def one(consumer: str, timed: bool) -> None:
        nonlocal deltas, items
        gc.collect()  # what the previous run left is not this run's to collect
        cpu = time.thread_time()
        start = time.perf_counter_ns()
        if consumer == "sdk":
            count = await sdk_run()
        elif consumer == "adapter":
            items = await adapter_items(provider, request, formatter)
        else:
            single = consumer == "membrane_single"
            blocks, ns = await membrane_run(provider, request, formatter, one_at_a_time=single)
        elapsed = (time.perf_counter_ns() - start) / 1e9
        cpu = time.thread_time() - cpu
        # Checked after the clock stops.
        if consumer == "sdk":
            if deltas and count != deltas:
                raise MembraneOutputError(f"{where}: the SDK read {count} items, then {deltas}")
            deltas = count
        elif consumer == "adapter":
            if mode == "chat":
                check_blocks(assemble(items)[1], reply, f"{where}, adapter")
        else:
            check_blocks(blocks, reply, f"{where}, Membrane")
            if timed and consumer == "membrane_single":  # (fed as the parts alone are)
                timings.parse_ns.append(ns)
        if timed:
            timings.seconds[consumer].append(elapsed)
            timings.cpu[consumer].append(cpu)

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
    if deltas == 0:
        raise MembraneOutputError(f"{where}: the SDK read no stream items")
    result = CaseResult(
        vendor=vendor,
        mode=mode,
        formatter=formatter,
        deltas=deltas,
        seconds={c: tuple(v) for c, v in timings.seconds.items()},
        cpu_seconds={c: tuple(v) for c, v in timings.cpu.items()},
        parse_ns=tuple(timings.parse_ns),
    )
    return result, items


def _in_process(
    case: CaseResult, items: Sequence[ProviderOutput], reply: LongReply, repeats: int
) -> InProcessResult:
    if case.mode == "chat":
        component = "NativeBlockAssembler"
        feeds = len(items)
        runs = [assemble(items) for _ in range(repeats)]
    else:
        from ..formats import get_formatter

        component = "XmlStreamParser"
        prefill = get_formatter(case.formatter).build(request_for(case.vendor)).prefill or ""
        # As Membrane feeds it: the pieces the API sent, then the stop sequence written back.
        pieces = [*reply.xml_pieces(), FUNCTION_CALLS_END]
        feeds = len(pieces)
        runs = [parse(pieces, prefill) for _ in range(repeats)]
    for _, blocks in runs:
        check_blocks(blocks, reply, f"{component} ({case.label})")
    return InProcessResult(component, case.label, feeds, case.deltas, tuple(s for s, _ in runs))


def _cases(vendors: Sequence[str]) -> list[tuple[str, Mode]]:
    cases: list[tuple[str, Mode]] = [(vendor, "chat") for vendor in vendors]
    if "anthropic" in vendors:
        cases.append(("anthropic", "prefill"))
    return cases


async def _run_all(
    reply: LongReply, repeats: int, vendors: Sequence[str]
) -> tuple[list[CaseResult], list[InProcessResult]]:
    cases = _cases(vendors)
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
                url = urls[str(index)]
                case, items = await _run_case(vendor, mode, url, reply, repeats)
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

"""Membrane: what the adapters and ``Membrane`` add per streamed delta over each
vendor's SDK (``voice_membrane.bench.membrane_cost``, whose docstring has the
method) on one long reply — a thinking block, a few thousand characters of the
reply corpus and a tool call — cut into ``DELTA_CHARS``-character deltas; and
how long each adapter takes from ``stream()`` to handing its request to HTTP, by
the conversation's length (``voice_membrane.bench.request_cost``). The words:
``sections/membrane.md``; ``method_paragraph`` goes into the report's Method.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from benchmarks.prose import prose, title
from benchmarks.replies import REPLIES
from benchmarks.scenario import Scenario
from benchmarks.table import Column, Table, table
from voice_membrane.bench.membrane_cost import (
    CaseResult,
    InProcessResult,
    MembraneResults,
    run_membrane_cost,
)
from voice_membrane.bench.membrane_reply import build_reply
from voice_membrane.bench.request_cost import LENGTHS, MESSAGE, RequestCost, run_request_cost
from voice_membrane.bench.stats import span

MEMBRANE_TITLE = title("membrane")
DELTA_CHARS = 4
TEXT_CHARS = 4_000
THINKING_CHARS = 1_000
REPEATS = 11
SEND_CALLS = 100  # calls per repetition of the before-the-first-byte measurement
SEND_REPEATS = 5
VENDORS = ("anthropic", "openai", "gemini")
FAST_DELTAS_PER_S = 200  # a fast model's stream: what the CPU-share finding assumes


def run_membrane_bench(
    text_chars: int = TEXT_CHARS,
    thinking_chars: int = THINKING_CHARS,
    repeats: int = REPEATS,
    vendors: Sequence[str] = VENDORS,
    send_calls: int = SEND_CALLS,
    send_repeats: int = SEND_REPEATS,
) -> MembraneResults:
    # The corpus has no ``<`` or ``&``: the reply's XML form needs no escaping.
    corpus = [reply.text for reply in REPLIES]
    reply = build_reply(corpus, text_chars, thinking_chars, DELTA_CHARS)
    results = run_membrane_cost(reply, repeats, vendors)
    before_send = run_request_cost(vendors, LENGTHS, send_calls, send_repeats)
    return dataclasses.replace(results, before_send=tuple(before_send))


def _us(values: tuple[float, float, float], signed: bool = False) -> str:
    """A (median, min, max) of µs as ``stats.span`` writes samples, signed or not."""
    mid, low, high = values
    sign = "+" if signed else ""
    return f"{mid:{sign}.1f} ({low:{sign}.1f} to {high:{sign}.1f})"


def _consumer(name: str, consumer: str) -> Column[CaseResult]:
    return Column(name, lambda case: _us(case.us_per_delta(consumer)))


def _added(name: str, upper: str, lower: str) -> Column[CaseResult]:
    return Column(name, lambda case: _us(case.added(upper, lower), signed=True))


HTTP_TABLE = Table[CaseResult](
    [
        Column("Vendor, mode (formatter)", lambda case: case.label),
        Column("deltas per reply", lambda case: f"{case.deltas:,}"),
        _consumer("(a) SDK alone", "sdk"),
        _consumer("(b) adapter", "adapter"),
        _consumer("(c) Membrane", "membrane"),
        _consumer("(d) Membrane, one delta at a time", "membrane_single"),
        _added("(b) \u2212 (a)", "adapter", "sdk"),
        _added("(c) \u2212 (b)", "membrane", "adapter"),
        _added("(d) \u2212 (b)", "membrane_single", "adapter"),
    ]
)


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 else "—"


def _single(case: CaseResult) -> float:
    """What Membrane adds over the adapter a delta at a time, (d) - (b): its median."""
    return case.added("membrane_single", "adapter")[0]


IN_PROCESS_TABLE = Table[tuple[InProcessResult, CaseResult]](  # the part, its case
    [
        Column("Component", lambda r: f"`{r[0].component}`"),
        Column("fed the items of", lambda r: r[0].case),
        Column("feed() calls", lambda r: f"{r[0].feeds:,}"),
        Column("alone, µs per delta", lambda r: _us(r[0].us_per_delta())),
        Column("inside (d), `parse_ns`", lambda r: f"{r[1].parse_us_per_delta()[0]:.2f}"),
        Column("(d) \u2212 (b)", lambda r: f"{_single(r[1]):+.1f}"),
        Column("share of (d) \u2212 (b)", lambda r: _share(r[0].us_per_delta()[0], _single(r[1]))),
    ]
)


def _range(values: Sequence[float], digits: int = 1) -> str:
    """The lowest to the highest, or one figure when they print alike."""
    low, high = (f"{v:.{digits}f}" for v in (min(values), max(values)))
    return low if low == high else f"{low} to {high}"


def _pairs_note(cases: Sequence[CaseResult], upper: str, lower: str) -> str:
    slower = sum(case.slower_in(upper, lower) for case in cases)
    total = sum(len(case.seconds[upper]) for case in cases)
    return f"slower in {slower} of {total} paired repetitions"


def findings(results: MembraneResults) -> list[str]:
    """A few sentences computed from the numbers (nothing here is fixed in advance)."""
    chat = [c for c in results.cases if c.mode == "chat"]
    lines: list[str] = []
    if chat:
        floors = {c.vendor: c.us_per_delta("sdk")[0] for c in chat}
        adapter = {c.vendor: c.added("adapter", "sdk")[0] for c in chat}
        lines.append(
            prose(
                "membrane#sdk",
                floors=_range(list(floors.values())),
                fastest=min(floors, key=floors.__getitem__),
                slowest=max(floors, key=floors.__getitem__),
                adapter=_range(list(adapter.values())),
                relative=_range([adapter[v] / floors[v] * 100 for v in floors], 0),
                pairs=_pairs_note(chat, "adapter", "sdk"),
            )
        )
        single = [_single(c) for c in chat]
        parts = [results.part_of(c) for c in chat]
        alone = [p.us_per_delta()[0] if p is not None else 0.0 for p in parts]
        pairs = list(zip(alone, single, strict=True))
        if all(whole > part for part, whole in pairs):
            shares = [part / whole * 100 for part, whole in pairs]
            rest = prose("membrane#chat-share", shares=_range(shares, 0))
        else:
            rest = prose("membrane#chat-unclear")
        lines.append(
            prose(
                "membrane#chat",
                joined=_range([c.added("membrane", "adapter")[0] for c in chat]),
                pairs=_pairs_note(chat, "membrane", "adapter"),
                single=_range(single),
                single_pairs=_pairs_note(chat, "membrane_single", "adapter"),
                alone=_range(alone, 2),
                rest=rest,
            )
        )
    for case in (c for c in results.cases if c.mode == "prefill"):
        part = results.part_of(case)
        if part is None:
            continue
        parser, single_one = part.us_per_delta()[0], _single(case)
        lines.append(
            prose(
                "membrane#prefill",
                vendor=case.vendor,
                formatter=case.formatter,
                added=case.added("membrane", "adapter")[0],
                pairs=_pairs_note([case], "membrane", "adapter"),
                single=single_one,
                parser=parser,
                share=f" ({_share(parser, single_one)} of it)" if single_one > parser else "",
                delta_chars=results.delta_chars,
            )
        )
    if results.cases:
        ours = max(c.added("membrane_single", "sdk")[0] for c in results.cases)
        sdk = max(c.us_per_delta("sdk")[0] for c in results.cases)
        per_core = FAST_DELTAS_PER_S / 1e4  # µs per delta → % of one core
        core = {"ours_core": max(ours, 0.0) * per_core, "sdk_core": sdk * per_core}
        lines.append(prose("membrane#core", ours=ours, rate=FAST_DELTAS_PER_S, **core))
    return lines


def _before_send(costs: Sequence[RequestCost]) -> str:
    """Each adapter's stream() to its request's hand-over, by conversation length."""
    if not costs:
        return ""
    lengths = sorted({cost.messages for cost in costs})
    by = {(cost.vendor, cost.messages): cost for cost in costs}
    first, last = lengths[0], lengths[-1]
    rows = []
    for vendor in dict.fromkeys(cost.vendor for cost in costs):
        cells = [span(by[vendor, n].us, 1) if (vendor, n) in by else "—" for n in lengths]
        slope = "—"
        if (vendor, first) in by and (vendor, last) in by and last > first:
            per = (by[vendor, last].spread()[0] - by[vendor, first].spread()[0]) / (last - first)
            slope = f"{per:+.0f}"
        rows.append([vendor, *cells, slope])
    headers = ["Vendor", *(f"{n} message{'s' if n > 1 else ''}" for n in lengths), "per message"]
    return prose(
        "membrane#before-send",
        message_chars=len(MESSAGE),
        repeats=len(costs[0].us),
        calls=costs[0].calls,
        table=table(headers, rows),
    )


def membrane_section(results: MembraneResults) -> str:
    cases = {case.label: case for case in results.cases}
    return prose(
        "membrane",
        thinking_chars=results.thinking_chars,
        text_chars=results.text_chars,
        delta_chars=results.delta_chars,
        versions=", ".join(f"{name} {version}" for name, version in results.sdk_versions.items()),
        xml_chars=results.xml_chars,
        repeats=results.repeats,
        http_table=HTTP_TABLE.render(results.cases),
        in_process_table=IN_PROCESS_TABLE.render((p, cases[p.case]) for p in results.in_process),
        findings="\n".join(findings(results)),
        before_send=_before_send(results.before_send),
    )


def method_paragraph(results: MembraneResults) -> str:
    """For the method section: how the Membrane figures were taken."""
    busy = min((case.busy_share() for case in results.cases), default=0.0)
    return prose("membrane#method", busy=busy, seconds=results.seconds)


SCENARIO = Scenario(
    "membrane", (MEMBRANE_TITLE,), run_membrane_bench, lambda r: [membrane_section(r)]
)

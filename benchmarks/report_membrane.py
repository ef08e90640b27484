"""The Membrane section of the benchmark report (``benchmarks.bench_membrane``)."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.bench_membrane import run_membrane_bench
from benchmarks.scenario import Scenario
from benchmarks.table import table
from voice_membrane.bench.membrane_cost import CaseResult, MembraneResults
from voice_membrane.bench.request_cost import MESSAGE, RequestCost

MEMBRANE_TITLE = "Membrane: cost per streamed delta over the vendors' SDKs"
FAST_DELTAS_PER_S = 200  # a fast model's stream: what the CPU-share finding assumes


def _us(values: tuple[float, float, float], signed: bool = False) -> str:
    mid, low, high = values
    sign = "+" if signed else ""
    return f"{mid:{sign}.1f} ({low:{sign}.1f} to {high:{sign}.1f})"


def _http_table(cases: Sequence[CaseResult]) -> str:
    return table(
        [
            "Vendor, mode (formatter)",
            "deltas per reply",
            "(a) SDK alone",
            "(b) adapter",
            "(c) Membrane",
            "(d) Membrane, one delta at a time",
            "(b) \u2212 (a)",
            "(c) \u2212 (b)",
            "(d) \u2212 (b)",
        ],
        [
            [
                case.label,
                f"{case.deltas:,}",
                _us(case.us_per_delta("sdk")),
                _us(case.us_per_delta("adapter")),
                _us(case.us_per_delta("membrane")),
                _us(case.us_per_delta("membrane_single")),
                _us(case.added("adapter", "sdk"), signed=True),
                _us(case.added("membrane", "adapter"), signed=True),
                _us(case.added("membrane_single", "adapter"), signed=True),
            ]
            for case in cases
        ],
    )


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 else "—"


def _in_process_table(results: MembraneResults) -> str:
    rows: list[list[object]] = []
    for part in results.in_process:
        case = next(c for c in results.cases if c.label == part.case)
        added = case.added("membrane_single", "adapter")[0]
        alone = part.us_per_delta()
        rows.append(
            [
                f"`{part.component}`",
                part.case,
                f"{part.feeds:,}",
                _us(alone),
                f"{case.parse_us_per_delta()[0]:.2f}",
                f"{added:+.1f}",
                _share(alone[0], added),
            ]
        )
    return table(
        [
            "Component",
            "fed the items of",
            "feed() calls",
            "alone, µs per delta",
            "inside (d), `parse_ns`",
            "(d) \u2212 (b)",
            "share of (d) \u2212 (b)",
        ],
        rows,
    )


def _span(values: Sequence[float], digits: int = 1) -> str:
    low, high = min(values), max(values)
    if f"{low:.{digits}f}" == f"{high:.{digits}f}":
        return f"{low:.{digits}f}"
    return f"{low:.{digits}f} to {high:.{digits}f}"


def _pairs_note(cases: Sequence[CaseResult], upper: str, lower: str) -> str:
    slower = sum(case.slower_in(upper, lower) for case in cases)
    total = sum(len(case.seconds[upper]) for case in cases)
    return f"slower in {slower} of {total} paired repetitions"


def findings(results: MembraneResults) -> list[str]:
    """A few sentences computed from the numbers (nothing here is fixed in advance)."""
    chat = [c for c in results.cases if c.mode == "chat"]
    prefill = [c for c in results.cases if c.mode == "prefill"]
    lines: list[str] = []
    if chat:
        floors = {c.vendor: c.us_per_delta("sdk")[0] for c in chat}
        slowest = max(floors, key=floors.__getitem__)
        fastest = min(floors, key=floors.__getitem__)
        adapter = [c.added("adapter", "sdk") for c in chat]
        relative = [a[0] / floors[c.vendor] * 100 for a, c in zip(adapter, chat, strict=True)]
        lines.append(
            f"- The SDKs alone cost {_span(list(floors.values()))} µs per delta "
            f"({fastest} least, {slowest} most); our adapters add a median "
            f"{_span([a[0] for a in adapter])} µs per delta to that "
            f"({_span(relative, 0)}% of the SDK's own cost; "
            f"{_pairs_note(chat, 'adapter', 'sdk')})."
        )
        joined = [c.added("membrane", "adapter")[0] for c in chat]
        added = [c.added("membrane_single", "adapter") for c in chat]
        parts = [results.part_of(c) for c in chat]
        alone = [p.us_per_delta()[0] if p is not None else 0.0 for p in parts]
        pairs = list(zip(alone, (a[0] for a in added), strict=True))
        if all(whole > part for part, whole in pairs):
            shares = [part / whole * 100 for part, whole in pairs]
            rest = (
                f", {_span(shares, 0)}% of it; the rest is Membrane's work around it: "
                "the secret masker over every event (substring tests where no key can "
                "begin), the deadlines (a timer only on a wait that suspends: the first-token "
                "deadline, then the stall deadline), the reply loop's generator layers and the "
                "routing of each item, plus per-reply work (formatting the request, building "
                "the `ReplyResult`) spread over the deltas"
            )
        else:
            rest = (
                ", as much as or more than the measured difference for some vendor: there "
                "this run cannot tell parsing from plumbing"
            )
        lines.append(
            f"- In chat mode Membrane adds a median {_span(joined)} µs per delta over the "
            f"adapter ({_pairs_note(chat, 'membrane', 'adapter')}), reading the deltas "
            "that arrived together as one, as this stream's do. Read one at a time, as "
            "deltas that arrive one by one are, it adds "
            f"{_span([a[0] for a in added])} µs "
            f"({_pairs_note(chat, 'membrane_single', 'adapter')}); "
            "`NativeBlockAssembler` alone, fed "
            f"the same items, takes {_span(alone, 2)} µs per delta{rest}."
        )
    for case in prefill:
        part = results.part_of(case)
        added_prefill = case.added("membrane", "adapter")[0]
        single = case.added("membrane_single", "adapter")[0]
        if part is None:
            continue
        parser = part.us_per_delta()[0]
        share = f" ({_share(parser, single)} of it)" if single > parser else ""
        lines.append(
            f"- In prefill mode ({case.vendor}, `{case.formatter}`) Membrane adds a median "
            f"{added_prefill:.1f} µs per delta "
            f"({_pairs_note([case], 'membrane', 'adapter')}), {single:.1f} one delta at a "
            f"time; `XmlStreamParser` alone takes {parser:.2f} µs per delta{share}, fed the "
            f"same XML in {results.delta_chars}-character pieces."
        )
    if results.cases:
        ours = max(c.added("membrane_single", "sdk")[0] for c in results.cases)
        sdk = max(c.us_per_delta("sdk")[0] for c in results.cases)
        per_core = FAST_DELTAS_PER_S / 1e4  # µs per delta → % of one core
        lines.append(
            f"- All that our code adds over the SDK, a delta at a time ((d) \u2212 (a)), is at "
            f"most {ours:.1f} µs per delta here: at {FAST_DELTAS_PER_S} deltas a second, "
            "a fast model's stream, "
            f"{max(ours, 0.0) * per_core:.2f}% of one core, against {sdk * per_core:.1f}% "
            "for the costliest SDK alone."
        )
    return lines


def membrane_section(results: MembraneResults) -> str:
    versions = ", ".join(f"{name} {version}" for name, version in results.sdk_versions.items())
    return "\n\n".join(
        [
            f"## {MEMBRANE_TITLE}",
            "Each vendor's fake server plays one long reply — a thinking block of "
            f"{results.thinking_chars:,} characters, {results.text_chars:,} characters of "
            f"text and a tool call, cut into {results.delta_chars}-character deltas, no delays — "
            "read to the end by (a) the official SDK alone iterating its raw stream, "
            "(b) our adapter's `stream()`, (c) `Membrane(adapter, formatter).stream(request)` "
            "to its `ReplyResult`, which reads the deltas that have arrived together as one "
            "(`membrane/call_stream.py`), and (d) the same reading every delta on its own, "
            "as it does when they arrive one by one (a slower model's stream) or a stream "
            f"policy runs ({versions}). Prefill mode plays the same reply as "
            f"{results.xml_chars:,} characters of XML, stopped at `</function_calls>`. "
            "Wall-clock µs per delta, *deltas* being the items the SDK's stream yields "
            "(its SSE events or chunks); median (min to max) over "
            f"{results.repeats} repetitions. The four take turns within a repetition, and "
            "the added costs (b) \u2212 (a), (c) \u2212 (b) and (d) \u2212 (b) are medians "
            "over the "
            "repetitions of each pair's difference (see Method), so they need not equal "
            "the difference of the columns' medians.",
            _http_table(results.cases),
            "Without HTTP: the parser or assembler alone, fed what Membrane feeds it (an "
            "adapter's items, or the XML in pieces), per delta of the same case. "
            "*inside (d)* is what Membrane itself timed around those calls (`parse_ns`, "
            "two clock reads per item included).",
            _in_process_table(results),
            "\n".join(findings(results)),
            *_before_send(results.before_send),
        ]
    )


def _before_send(costs: Sequence[RequestCost]) -> list[str]:
    """Each adapter's stream() to its request's hand-over, by conversation length."""
    if not costs:
        return []
    lengths = sorted({cost.messages for cost in costs})
    vendors = list(dict.fromkeys(cost.vendor for cost in costs))
    by = {(cost.vendor, cost.messages): cost for cost in costs}
    first, last = lengths[0], lengths[-1]
    rows = []
    for vendor in vendors:
        cells = [_us(by[vendor, n].spread()) if (vendor, n) in by else "—" for n in lengths]
        slope = "—"
        if (vendor, first) in by and (vendor, last) in by and last > first:
            per = (by[vendor, last].spread()[0] - by[vendor, first].spread()[0]) / (last - first)
            slope = f"{per:+.0f}"
        rows.append([vendor, *cells, slope])
    calls = costs[0].calls
    repeats = len(costs[0].us)
    return [
        "Before the first byte: each adapter's `stream()` (chat mode, a system prompt, "
        f"the conversation as alternating user and assistant messages of {len(MESSAGE)} "
        "characters) "
        "until the SDK hands the request to `httpx`, whose `send` is replaced for the run "
        "by one that notes the time and refuses it (`voice_membrane/bench/request_cost.py`): "
        "building, validating and serialising the request, paid on every turn before the "
        f"provider starts on its first token. µs, median (min to max) over {repeats} "
        f"repetitions of the median of {calls} calls; *per message* the slope between the "
        "shortest and the longest.",
        table(
            ["Vendor", *(f"{n} message{'s' if n > 1 else ''}" for n in lengths), "per message"],
            rows,
        ),
    ]


def method_paragraph(results: MembraneResults) -> str:
    """For the method section: how the Membrane figures were taken."""
    busy = min((case.busy_share() for case in results.cases), default=0.0)
    return (
        "*Membrane per delta*: the fake servers (`voice_membrane.testing`) run in a child "
        "process, as a real API is elsewhere, so the benchmark's process does only the "
        "client's work; with no delays scripted the servers keep ahead of it, and the "
        f"client thread was on the CPU for at least {busy:.0%} of each case's wall time "
        "(median over runs), so wall time per delta is the client's CPU cost per delta. "
        "The bare SDK clients send the request the adapters send (built by the adapters' "
        "own request mapping), with retries off. One warm-up run of each consumer comes "
        "first; every run's output is then checked outside the clock (the thinking, text "
        "and tool call that come out must be the scripted ones). The garbage collector "
        "stays on, with the heap left by imports and warm-up frozen (`gc.freeze`) and a "
        "collection before each run. This "
        "machine's CPU speed drifts by up to a half over a few seconds, alike for every "
        "consumer, so added costs are taken from paired runs as ratios: each "
        "repetition's (b) / (a) \u2212 1 (or (c) / (b) \u2212 1, (d) / (b) \u2212 1) "
        "times the median of (a) (or (b)); the table gives the median and range of those. "
        "The Membrane "
        f"benchmark took {results.seconds:.0f} s."
    )


SCENARIO = Scenario(
    "membrane", (MEMBRANE_TITLE,), run_membrane_bench, lambda r: [membrane_section(r)]
)

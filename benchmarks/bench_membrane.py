"""Membrane benchmark: what the adapters and ``Membrane`` add per streamed delta.

Each vendor's fake server (``voice_membrane.testing``) plays one long scripted reply —
a thinking block, a few thousand characters of text and a tool call, cut into
``DELTA_CHARS``-character deltas, no delays — and three consumers read it to the end:

- ``sdk``: the official SDK alone iterating its raw stream (the floor);
- ``adapter``: our provider adapter's ``stream()``, to its last ``ProviderOutput``;
- ``membrane``: ``Membrane(adapter, formatter).stream(request)``, to its ``ReplyResult``.

Chat mode (formatter ``native``) for Anthropic, OpenAI and Gemini, and prefill mode
(``anthropic-xml``, the same reply written as XML text) for Anthropic. The three
consumers take turns within a repetition (the order rotates between repetitions), so
the added costs come from pairs of runs made one after the other (``CaseResult.added``).
The bare SDK clients send the very request the adapters send (built by the adapters'
own request mapping).

The fake servers run in a child process, as a real API is elsewhere: this process does
only the client's work, so the wall time per delta is what reading the stream costs
the client (the servers, with nothing to wait for, keep ahead of it). Garbage
collection stays on, but the heap left by imports and warm-up is frozen
(``gc.freeze``), so a full collection of the SDKs' modules cannot land in one run.

Beside it, the pure in-process cost, without HTTP or event loop:
``NativeBlockAssembler`` fed the items an adapter yielded, and ``XmlStreamParser`` fed
the XML reply in pieces, as Membrane feeds them.

Every run's output is checked (the blocks that come out must be the scripted ones), so
a consumer that drops text cannot post a fast number.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.metadata
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from benchmarks.child import child_process
from benchmarks.replies import REPLIES
from benchmarks.stats import median
from voice_membrane.providers.base import Provider
from voice_membrane.testing.script import ScriptedReply, text, thinking, tool_use
from voice_membrane.vocab.events import Block, BlockComplete
from voice_membrane.vocab.messages import Message, ModelConfig, Request, ToolDefinition
from voice_membrane.vocab.provider_output import ProviderOutput

DELTA_CHARS = 4
TEXT_CHARS = 4_000
THINKING_CHARS = 1_000
REPEATS = 11
VENDORS = ("anthropic", "openai", "gemini")
SDK_DISTRIBUTIONS = ("anthropic", "openai", "google-genai")
FUNCTION_CALLS_END = "</function_calls>"
TOOL_NAME = "get_weather"
TOOL_INPUT: dict[str, Any] = {
    "city": "Paris",
    "units": "metric",
    "days": 3,
    "details": "hourly temperature, wind and the chance of rain",
}
TOOLS = [
    ToolDefinition(
        name=TOOL_NAME,
        description="The weather forecast for a city.",
        input_schema={
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "units": {"type": "string"},
                "days": {"type": "integer"},
                "details": {"type": "string"},
            },
        },
    )
]
CONSUMERS = ("sdk", "adapter", "membrane")
MODELS = {"anthropic": "claude-bench", "openai": "gpt-bench", "gemini": "gemini-bench"}
Mode = Literal["chat", "prefill"]


class MembraneOutputError(RuntimeError):
    """A consumer's output does not match the scripted reply; its timing is void."""


# --------------------------------------------------------------------------- the reply


@dataclass(frozen=True, slots=True)
class LongReply:
    """One logical reply: what is scripted, and the same reply as prefill-mode XML."""

    thinking: str
    text: str
    tool_input: dict[str, Any]

    def script(self, mode: Mode) -> ScriptedReply:
        if mode == "chat":
            return ScriptedReply.of(
                thinking(self.thinking),
                text(self.text),
                tool_use(TOOL_NAME, self.tool_input),
                delta_chars=DELTA_CHARS,
            )
        # The API stops at the stop sequence and does not send it; Membrane writes it back.
        return ScriptedReply.of(
            self.xml,
            stop_reason="stop_sequence",
            stop_sequence=FUNCTION_CALLS_END,
            delta_chars=DELTA_CHARS,
        )

    @property
    def xml(self) -> str:
        """As a model writes it in prefill mode, up to the ``</function_calls>`` stop."""
        parameters = "\n".join(
            f'<parameter name="{name}">{value}</parameter>'
            for name, value in self.tool_input.items()
        )
        return (
            f"<thinking>\n{self.thinking}\n</thinking>\n\n{self.text}\n\n"
            f'<function_calls>\n<invoke name="{TOOL_NAME}">\n{parameters}\n</invoke>\n'
        )

    def xml_pieces(self) -> list[str]:
        wire = self.xml
        return [wire[i : i + DELTA_CHARS] for i in range(0, len(wire), DELTA_CHARS)]


def _prose(target: int, texts: Sequence[str]) -> str:
    taken: list[str] = []
    size = 0
    for piece in texts:
        if size >= target:
            break
        taken.append(piece)
        size += len(piece) + 1
    return " ".join(taken)


def build_reply(text_chars: int = TEXT_CHARS, thinking_chars: int = THINKING_CHARS) -> LongReply:
    """Visible text from the reply corpus in order, thinking from it backwards (the
    corpus has no ``<`` or ``&``, so the XML form needs no escaping)."""
    corpus = [reply.text for reply in REPLIES]
    while sum(len(t) + 1 for t in corpus) < text_chars + thinking_chars:
        corpus += corpus
    return LongReply(
        thinking=_prose(thinking_chars, corpus[::-1]),
        text=_prose(text_chars, corpus),
        tool_input=dict(TOOL_INPUT),
    )


def _words(value: str | None) -> str:
    # Whitespace at block edges is layout either side may trim; words may not move.
    return " ".join((value or "").split())


def check_blocks(blocks: Sequence[Block], reply: LongReply, where: str) -> None:
    """Raise ``MembraneOutputError`` unless ``blocks`` are the reply's thinking, text, call."""
    said = [b for b in blocks if b.type != "text" or _words(b.content)]
    kinds = [b.type for b in said]
    if kinds != ["thinking", "text", "tool_call"]:
        raise MembraneOutputError(f"{where}: blocks {kinds}, not thinking, text, tool_call")
    thought, spoken, call = said
    if _words(thought.content) != _words(reply.thinking):
        raise MembraneOutputError(f"{where}: the thinking differs from the script")
    if _words(spoken.content) != _words(reply.text):
        raise MembraneOutputError(f"{where}: the text differs from the script")
    if call.tool_name != TOOL_NAME or dict(call.input or {}) != reply.tool_input:
        raise MembraneOutputError(f"{where}: the tool call is {call.tool_name} {call.input}")


# --------------------------------------------------------------------------- results


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
    parse_ns: tuple[int, ...]  # Membrane.parse_ns of each timed membrane run

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
    case: str  # the CaseResult.label whose (membrane - adapter) this is part of
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
    repeats: int
    cases: list[CaseResult]
    in_process: list[InProcessResult]
    sdk_versions: dict[str, str]  # distribution → version
    seconds: float  # the whole benchmark

    def part_of(self, case: CaseResult) -> InProcessResult | None:
        return next((p for p in self.in_process if p.case == case.label), None)


# --------------------------------------------------------------------------- the servers

# --serve runs in the child process: one fake server per case, each queued with
# every reply the parent will ask for, the base URLs printed as one JSON line; the
# child exits when the parent closes its stdin.


def _fakes() -> dict[str, Any]:
    from voice_membrane.testing.fake_anthropic import FakeAnthropic
    from voice_membrane.testing.fake_gemini import FakeGemini
    from voice_membrane.testing.fake_openai import FakeOpenAI

    return {"anthropic": FakeAnthropic, "openai": FakeOpenAI, "gemini": FakeGemini}


def _serve(spec: dict[str, Any]) -> None:
    reply = LongReply(spec["thinking"], spec["text"], spec["tool_input"])
    fakes = _fakes()
    servers = []
    for vendor, mode in spec["cases"]:
        server = fakes[vendor](*[reply.script(mode)] * spec["replies"])
        servers.append(server.start())
    print(json.dumps([server.base_url for server in servers]), flush=True)
    sys.stdin.read()  # until the parent closes it (or dies)
    # No graceful stop: the servers' threads are daemons and end with the process.


@contextlib.contextmanager
def _served(
    cases: Sequence[tuple[str, Mode]], reply: LongReply, replies: int
) -> Iterator[Callable[[], list[str]]]:
    """Fake servers in a child process, one per case; what is yielded waits for them
    and returns their base URLs (the caller can do other work while they start)."""
    spec = {
        "cases": [list(case) for case in cases],
        "thinking": reply.thinking,
        "text": reply.text,
        "tool_input": reply.tool_input,
        "replies": replies,
    }
    with child_process("benchmarks.bench_membrane", ["--serve", json.dumps(spec)]) as child:

        def base_urls() -> list[str]:
            urls: list[str] = json.loads(child.line)
            return urls

        yield base_urls


# --------------------------------------------------------------------------- the consumers


def _request(vendor: str) -> Request:
    return Request(
        messages=[Message(participant="User", content="What will the weather be in Paris?")],
        config=ModelConfig(model=MODELS[vendor], max_tokens=4096),
        tools=TOOLS,
    )


SdkRun = Callable[[], Awaitable[int]]  # one reply through the bare SDK: stream items read
Closer = Callable[[], Awaitable[None]]


def _sdk(vendor: str, base_url: str, request: Request, formatter: str) -> tuple[SdkRun, Closer]:
    """The official SDK alone, sending what the adapter would send."""
    from voice_membrane.formats import get_formatter

    built = get_formatter(formatter).build(request)
    if vendor == "anthropic":
        import anthropic

        from voice_membrane.providers.anthropic_request import request_params

        params = request_params(built, request.config)
        claude = anthropic.AsyncAnthropic(api_key="fake-key", base_url=base_url, max_retries=0)

        async def run_anthropic() -> int:
            count = 0
            async for _ in await claude.messages.create(stream=True, **params):
                count += 1
            return count

        return run_anthropic, claude.close
    if vendor == "openai":
        import openai

        from voice_membrane.providers.openai_request import chat_request, token_field

        field = token_field(base_url)
        kwargs = chat_request(built, request.config, max_tokens_field=field, streaming=True)
        gpt = openai.AsyncOpenAI(api_key="fake-key", base_url=base_url, max_retries=0)

        async def run_openai() -> int:
            count = 0
            async for _ in await gpt.chat.completions.create(**kwargs):
                count += 1
            return count

        return run_openai, gpt.close
    from google import genai
    from google.genai import types

    from voice_membrane.providers.gemini_request import request_config, request_contents

    contents, config = request_contents(built), request_config(built, request.config)
    options = types.HttpOptions(base_url=base_url, retry_options=types.HttpRetryOptions(attempts=1))
    gemini = genai.Client(api_key="fake-key", http_options=options)
    model = request.config.model

    async def run_gemini() -> int:
        count = 0
        stream = await gemini.aio.models.generate_content_stream(
            model=model, contents=contents, config=config
        )
        async for _ in stream:
            count += 1
        return count

    async def close_gemini() -> None:
        await gemini.aio.aclose()
        gemini.close()

    return run_gemini, close_gemini


def _adapter(vendor: str, base_url: str) -> Provider:
    from voice_membrane.providers.anthropic import AnthropicProvider
    from voice_membrane.providers.gemini import GeminiProvider
    from voice_membrane.providers.openai import OpenAIProvider

    kinds: dict[str, Callable[..., Provider]] = {
        "anthropic": AnthropicProvider,
        "openai": OpenAIProvider,
        "gemini": GeminiProvider,
    }
    return kinds[vendor](api_key="fake-key", base_url=base_url)


async def _adapter_items(provider: Provider, request: Request, formatter: str) -> list[Any]:
    from voice_membrane.formats import get_formatter

    built = get_formatter(formatter).build(request)
    items: list[ProviderOutput] = []
    keep = items.append
    async for item in provider.stream(built, request.config):
        keep(item)
    return items


async def _membrane_run(
    provider: Provider, request: Request, formatter: str
) -> tuple[tuple[Block, ...], int]:
    from voice_membrane.membrane.membrane import Membrane
    from voice_membrane.membrane.reply import ReplyResult

    membrane = Membrane(provider, formatter)
    result: ReplyResult | None = None
    async for item in membrane.stream(request):
        if isinstance(item, ReplyResult):
            result = item
    if result is None:
        raise MembraneOutputError("Membrane.stream ended without a ReplyResult")
    return result.blocks, membrane.parse_ns


def _timed_feed(
    feed: Callable[[Any], list[Any]], flush: Callable[[], list[Any]], inputs: Sequence[Any]
) -> tuple[float, list[Block]]:
    """Seconds to feed every input and flush, and the blocks that came out."""
    events: list[Any] = []
    keep = events.extend  # bound once: the loop is what is measured
    gc.collect()
    start = time.perf_counter_ns()
    for value in inputs:
        keep(feed(value))
    keep(flush())
    elapsed = (time.perf_counter_ns() - start) / 1e9
    return elapsed, [e.block for e in events if isinstance(e, BlockComplete)]


def _assemble(items: Sequence[ProviderOutput]) -> tuple[float, list[Block]]:
    from voice_membrane.parse import NativeBlockAssembler

    assembler = NativeBlockAssembler()
    return _timed_feed(assembler.feed, assembler.flush, items)


def _parse(pieces: Sequence[str], prefill: str) -> tuple[float, list[Block]]:
    from voice_membrane.formats import get_formatter

    parser = get_formatter("anthropic-xml").create_parser(prefill)
    assert parser is not None
    return _timed_feed(parser.feed, parser.flush, pieces)


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
    request = _request(vendor)
    where = f"{vendor} ({mode})"
    provider = _adapter(vendor, base_url)
    sdk_run, sdk_close = _sdk(vendor, base_url, request, formatter)
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
            items = await _adapter_items(provider, request, formatter)
        else:
            blocks, ns = await _membrane_run(provider, request, formatter)
        elapsed = (time.perf_counter_ns() - start) / 1e9
        cpu = time.thread_time() - cpu
        # Checked after the clock stops.
        if consumer == "sdk":
            if deltas and count != deltas:
                raise MembraneOutputError(f"{where}: the SDK read {count} items, then {deltas}")
            deltas = count
        elif consumer == "adapter":
            if mode == "chat":
                check_blocks(_assemble(items)[1], reply, f"{where}, adapter")
        else:
            check_blocks(blocks, reply, f"{where}, Membrane")
            if timed:
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
        runs = [_assemble(items) for _ in range(repeats)]
    else:
        from voice_membrane.formats import get_formatter

        component = "XmlStreamParser"
        prefill = get_formatter(case.formatter).build(_request(case.vendor)).prefill or ""
        # As Membrane feeds it: the pieces the API sent, then the stop sequence written back.
        pieces = [*reply.xml_pieces(), FUNCTION_CALLS_END]
        feeds = len(pieces)
        runs = [_parse(pieces, prefill) for _ in range(repeats)]
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
    with _served(cases, reply, len(CONSUMERS) * (repeats + 1)) as base_urls:
        # Imported while the servers start, before any clock: a missing SDK reports
        # this benchmark as not run (ImportError), and no import lands in a timed run.
        import anthropic  # noqa: F401
        import openai  # noqa: F401
        from google import genai  # noqa: F401

        urls = base_urls()
        gc.collect()
        gc.freeze()  # the modules' objects: no collection need walk them again
        try:
            for (vendor, mode), url in zip(cases, urls, strict=True):
                case, items = await _run_case(vendor, mode, url, reply, repeats)
                results.append(case)
                in_process.append(_in_process(case, items, reply, repeats))
        finally:
            gc.unfreeze()
    return results, in_process


def run_membrane_bench(
    text_chars: int = TEXT_CHARS,
    thinking_chars: int = THINKING_CHARS,
    repeats: int = REPEATS,
    vendors: Sequence[str] = VENDORS,
) -> MembraneResults:
    started = time.perf_counter()
    reply = build_reply(text_chars, thinking_chars)
    cases, in_process = asyncio.run(_run_all(reply, repeats, vendors))
    return MembraneResults(
        text_chars=len(reply.text),
        thinking_chars=len(reply.thinking),
        xml_chars=len(reply.xml),
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


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"] and len(sys.argv) == 3:
        _serve(json.loads(sys.argv[2]))
    else:
        sys.exit("usage: python -m benchmarks.bench_membrane --serve SPEC (run by the benchmark)")

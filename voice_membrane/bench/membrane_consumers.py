"""The readers of the Membrane-cost measurement's stream (``membrane_cost``): the
vendor's official SDK alone (sending the very request our adapter sends, built
by the adapters' own request mapping), our provider adapter, and ``Membrane``;
and, without HTTP, the parser or assembler fed alone what Membrane feeds it."""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..formats import get_formatter
from ..formats.base import BuiltRequest
from ..providers.base import Provider
from ..vocab.events import Block, BlockComplete
from ..vocab.messages import Message, ModelConfig, Request, ToolDefinition
from ..vocab.provider_output import ProviderOutput
from .membrane_reply import TOOL_INPUT, TOOL_NAME, MembraneOutputError
from .request_cost import PROVIDERS

# ``membrane_single``: Membrane reading the deltas one at a time, as it reads a
# stream whose deltas arrive one by one (``membrane/call_stream.py``).
CONSUMERS = ("sdk", "adapter", "membrane", "membrane_single")
MODELS = {"anthropic": "claude-bench", "openai": "gpt-bench", "gemini": "gemini-bench"}
KEY = "fake-key"
TYPES = {str: "string", int: "integer"}
TOOLS = [
    ToolDefinition(
        name=TOOL_NAME,
        description="The weather forecast for a city.",
        input_schema={
            "type": "object",
            "properties": {name: {"type": TYPES[type(v)]} for name, v in TOOL_INPUT.items()},
        },
    )
]

Closer = Callable[[], Awaitable[None]]
# One reply's stream through the bare SDK (awaited, then iterated), and the client's closer.
SdkStream = tuple[Callable[[], Awaitable[Any]], Closer]


def request_for(vendor: str) -> Request:
    return Request(
        messages=[Message(participant="User", content="What will the weather be in Paris?")],
        config=ModelConfig(model=MODELS[vendor], max_tokens=4096),
        tools=TOOLS,
    )


def _anthropic(base_url: str, built: BuiltRequest, config: ModelConfig) -> SdkStream:
    import anthropic

    from ..providers.anthropic_request import request_params

    params = request_params(built, config)
    claude = anthropic.AsyncAnthropic(api_key=KEY, base_url=base_url, max_retries=0)
    return lambda: claude.messages.create(stream=True, **params), claude.close


def _openai(base_url: str, built: BuiltRequest, config: ModelConfig) -> SdkStream:
    import openai

    from ..providers.openai_request import chat_request, token_field

    field = token_field(base_url)
    kwargs = chat_request(built, config, max_tokens_field=field, streaming=True)
    gpt = openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=0)
    return lambda: gpt.chat.completions.create(**kwargs), gpt.close


def _gemini(base_url: str, built: BuiltRequest, config: ModelConfig) -> SdkStream:
    from google import genai
    from google.genai import types

    from ..providers.gemini_request import call_contents, request_config

    contents, options = call_contents(built), request_config(built, config)
    http = types.HttpOptions(base_url=base_url, retry_options=types.HttpRetryOptions(attempts=1))
    gemini = genai.Client(api_key=KEY, http_options=http)

    async def close() -> None:
        await gemini.aio.aclose()
        gemini.close()

    stream = gemini.aio.models.generate_content_stream
    return lambda: stream(model=config.model, contents=contents, config=options), close


SDKS = {"anthropic": _anthropic, "openai": _openai, "gemini": _gemini}


def sdk_reader(
    vendor: str, base_url: str, request: Request, formatter: str
) -> tuple[Callable[[], Awaitable[int]], Closer]:
    """The official SDK alone, sending what the adapter would send: a run reads
    one reply and returns how many stream items it read."""
    built = get_formatter(formatter).build(request)
    open_stream, close = SDKS[vendor](base_url, built, request.config)

    async def run() -> int:
        count = 0
        async for _ in await open_stream():
            count += 1
        return count

    return run, close


def adapter(vendor: str, base_url: str) -> Provider:
    return PROVIDERS[vendor](api_key=KEY, base_url=base_url)


async def adapter_items(provider: Provider, request: Request, formatter: str) -> list[Any]:
    built = get_formatter(formatter).build(request)
    items: list[ProviderOutput] = []
    keep = items.append
    async for item in provider.stream(built, request.config):
        keep(item)
    return items


async def membrane_run(
    provider: Provider, request: Request, formatter: str, *, one_at_a_time: bool = False
) -> tuple[tuple[Block, ...], int]:
    """The reply through ``Membrane``: its blocks, and its own ``parse_ns``.
    ``one_at_a_time``: no ready deltas joined, as when each arrives alone."""
    from ..membrane import call_stream
    from ..membrane.membrane import Membrane
    from ..membrane.reply import ReplyResult

    membrane = Membrane(provider, formatter)
    result: ReplyResult | None = None
    joined = call_stream.JOINED_MOST
    # The one setting the benchmark changes, for this run only: a delta's whole
    # path, which a stream arriving together would not show.
    call_stream.JOINED_MOST = 1 if one_at_a_time else joined
    try:
        async for item in membrane.stream(request):
            if isinstance(item, ReplyResult):
                result = item
    finally:
        call_stream.JOINED_MOST = joined
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


def assemble(items: Sequence[ProviderOutput]) -> tuple[float, list[Block]]:
    """An adapter's items through a ``NativeBlockAssembler``, timed."""
    from ..parse import NativeBlockAssembler

    assembler = NativeBlockAssembler()
    return _timed_feed(assembler.feed, assembler.flush, items)


def parse(pieces: Sequence[str], prefill: str) -> tuple[float, list[Block]]:
    """Prefill-mode XML pieces through the ``anthropic-xml`` formatter's parser, timed."""
    parser = get_formatter("anthropic-xml").create_parser(prefill)
    assert parser is not None
    return _timed_feed(parser.feed, parser.flush, pieces)

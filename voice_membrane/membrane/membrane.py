"""Membrane: one object that turns a request into a stream of logical events.

``Membrane(provider, formatter=…)`` formats a ``Request``, calls the provider,
reads its output — raw text through the formatter's XML parser (prefill mode),
native blocks through ``NativeBlockAssembler`` (chat mode) — and yields the one
event vocabulary either way, then runs the tool loop::

    async for item in membrane.stream(request, on_tool_calls=run_tools):
        if isinstance(item, Chunk) and item.meta.visible:
            speak(item.text)

The loop: when a reply round ends with tool calls and ``on_tool_calls`` is
given, the calls run (bounded by ``tool_timeout_s``), their results flow out as
``tool_result`` blocks, and the conversation continues — prefill: the results
are appended as ``<function_results>`` and the assistant turn is resumed; chat:
native tool_use / tool_result messages — up to ``max_tool_depth`` rounds. Each
result is cut to ``max_tool_result_chars``, and one reply's results together to
``max_reply_tool_result_chars``, before the model or the events see it. In
prefill mode a stop sequence met inside an open hidden block (a participant
line quoted in thinking, say) is a false positive: the stop text is put back
and the turn resumed, unless a resume made no progress.

Retryable errors before a call's first output are retried (``retry.py``); an
error after it ends the reply with a ``ReplyError``, keeping what was produced.
``first_token_deadline_s`` bounds the wait for a call's first output over all
its attempts and backoff waits; when it passes the reply ends with a
``ReplyError`` of kind "timeout". ``stall_timeout_s`` then bounds each wait
for more (a delta of thinking or a tool call's input counts, a keep-alive or a
usage count does not); when it passes the reply ends with a ``ReplyError`` of
kind "stalled", keeping what came before.

Generated images (docs/images.md): an ``image_tool`` is offered to the model and
run by the loop like a tool, its images flowing out as an ``image`` block; a
provider that returns images itself (Gemini) gives the same block. Final images
go to ``image_store`` when one is given, and the history keeps their blob id.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing

from ..formats import Formatter, get_formatter
from ..parse.json_tools import JsonToolInterceptor
from ..parse.policy import StreamPolicy
from ..providers.base import Provider
from ..storage.blob_resolve import DEFAULT_LIMIT, resolve_blobs
from ..storage.blobs import BlobStore
from ..vendors.retry import RetryPolicy
from ..vocab.events import BlockComplete, BlockStart, Chunk
from ..vocab.messages import GeneratedImageContent, Request, validate_request
from ..vocab.provider_output import ProviderOutput
from .images import ImageStore, ImageTool
from .reply import ImagePreview, MembraneItem, ReplyResult, UsageUpdate
from .reply_loop import ReplyLoop
from .tool_limits import DEFAULT_MAX_REPLY_RESULT_CHARS, DEFAULT_MAX_RESULT_CHARS
from .tools import OnToolCalls

# A stream that has begun and then sends nothing new for this long has stalled. A
# few seconds: the embedded model makes a token in well under a second even on a
# busy 2-core machine, and a cloud stream's deltas come a fraction of a second
# apart; what a stall held back is spoken meanwhile (the turn's timed flush).
DEFAULT_STALL_TIMEOUT_S = 5.0


class Membrane:
    def __init__(
        self,
        provider: Provider,
        formatter: Formatter | str = "native",
        *,
        retry: RetryPolicy | None = None,
        max_tool_depth: int = 10,
        tool_timeout_s: float = 30.0,
        streaming: bool = True,
        first_token_deadline_s: float | None = 20.0,
        stall_timeout_s: float | None = DEFAULT_STALL_TIMEOUT_S,
        policies: Callable[[], Sequence[StreamPolicy]] | None = None,
        json_tools: Callable[[], JsonToolInterceptor] | None = None,
        image_tool: ImageTool | None = None,
        image_store: ImageStore | None = None,
        blob_store: BlobStore | None = None,
        blob_concurrency: int = DEFAULT_LIMIT,
        max_tool_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        max_reply_tool_result_chars: int = DEFAULT_MAX_REPLY_RESULT_CHARS,
    ) -> None:
        if first_token_deadline_s is not None and first_token_deadline_s <= 0:
            raise ValueError(
                f"first_token_deadline_s must be positive or None, got {first_token_deadline_s}"
            )
        if stall_timeout_s is not None and stall_timeout_s <= 0:
            raise ValueError(f"stall_timeout_s must be positive or None, got {stall_timeout_s}")
        self.provider = provider
        self.formatter = get_formatter(formatter) if isinstance(formatter, str) else formatter
        self.retry = retry if retry is not None else RetryPolicy()
        self.max_tool_depth = max_tool_depth
        self.tool_timeout_s = tool_timeout_s
        if min(max_tool_result_chars, max_reply_tool_result_chars) < 1:
            raise ValueError("tool result limits must be at least 1 character")
        # Each tool result, and one reply's results together, are cut to these
        # (with a marker the model reads) before anything keeps them: tool_limits.py.
        self.max_tool_result_chars = max_tool_result_chars
        self.max_reply_tool_result_chars = max_reply_tool_result_chars
        self.streaming = streaming
        self.first_token_deadline_s = first_token_deadline_s
        self.stall_timeout_s = stall_timeout_s
        self.parse_ns = 0  # time spent in the parser/assembler (for stage metrics)
        # Stream policies keep state over a reply: each reply gets fresh ones.
        self.policies = policies
        # Tool calls written as JSON in the text (small and local models): each reply
        # reads them with a fresh interceptor; None reads only the format's own calls.
        self.json_tools = json_tools
        self.image_tool = image_tool  # offered to the model in every request
        self.image_store = image_store  # final generated images stored here
        # Blob images are read from here when a request is built (blob_resolve.py).
        self.blob_store = blob_store
        self.blob_concurrency = blob_concurrency

    async def stream(
        self,
        request: Request,
        *,
        formatter: Formatter | str | None = None,
        on_tool_calls: OnToolCalls | None = None,
        on_chunk: Callable[[str, Chunk], None] | None = None,
        on_block: Callable[[BlockStart | BlockComplete], None] | None = None,
        on_usage: Callable[[UsageUpdate], None] | None = None,
        on_output: Callable[[ProviderOutput], None] | None = None,
        policies: Sequence[StreamPolicy] | None = None,
        on_image_start: Callable[[int, str | None], None] | None = None,
        on_image_preview: Callable[[GeneratedImageContent], None] | None = None,
        on_image: Callable[[GeneratedImageContent], None] | None = None,
    ) -> AsyncGenerator[MembraneItem, None]:
        """Yield the reply's events, ending with one ``ReplyResult``.

        The callbacks are a thin layer: each is called as its item passes
        (``on_chunk(text, chunk)``, ``on_block(event)``, ``on_usage(update)``);
        ``on_output`` sees every raw provider item (for timing). Generated
        images: ``on_image_start(index, prompt)`` as an image block starts
        (``prompt`` when known), ``on_image_preview(image)`` for each partial
        image, ``on_image(image)`` with the final one. ``policies``
        (``parse.policy``) judge the events before anything sees them; by
        default the membrane's own (a fresh set per reply). A request that
        cannot be sent raises ``RequestError`` before any network call; so does
        a blob image that cannot be read from ``blob_store`` (blobs are read
        here, just before the request is built, at most ``blob_concurrency``
        at a time).
        """
        fmt = self._formatter(request, formatter)
        tool = self.image_tool
        if tool is not None and all(t.name != tool.name for t in request.tools):
            request = request.model_copy(update={"tools": [*request.tools, tool.definition]})
        validate_request(request)
        request = await resolve_blobs(request, self.blob_store, limit=self.blob_concurrency)
        built = fmt.build(request)
        if policies is None:
            policies = self.policies() if self.policies is not None else ()
        run = ReplyLoop(self, fmt, request, built, on_tool_calls, on_output, policies)
        async with aclosing(run.items()) as items:
            async for item in items:
                if isinstance(item, Chunk):
                    if on_chunk is not None:
                        on_chunk(item.text, item)
                elif isinstance(item, BlockStart | BlockComplete):
                    if on_block is not None:
                        on_block(item)
                    if isinstance(item, BlockStart) and item.type == "image" and on_image_start:
                        on_image_start(item.index, item.prompt)
                    elif isinstance(item, BlockComplete) and item.block.image and on_image:
                        on_image(item.block.image)
                elif isinstance(item, ImagePreview):
                    if on_image_preview is not None:
                        on_image_preview(item.image)
                elif isinstance(item, UsageUpdate) and on_usage is not None:
                    on_usage(item)
                yield item

    async def complete(self, request: Request, **options: object) -> ReplyResult:
        """Run ``stream`` to its end and return the result."""
        result: ReplyResult | None = None
        async with aclosing(self.stream(request, **options)) as items:  # type: ignore[arg-type]
            async for item in items:
                if isinstance(item, ReplyResult):
                    result = item
        assert result is not None
        return result

    def _formatter(self, request: Request, override: Formatter | str | None) -> Formatter:
        chosen = override if override is not None else request.options.formatter
        if chosen is None:
            return self.formatter
        return get_formatter(chosen) if isinstance(chosen, str) else chosen

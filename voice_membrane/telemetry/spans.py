"""OpenTelemetry spans: the tracer every layer uses, and helpers to open a span
without ever recording text.

Only ``opentelemetry-api`` is needed here: with no SDK configured every call is
a no-op (``telemetry.setup_tracing`` configures one). Spans carry sizes,
counts, names and times — never user text, model text, an error's message or a
key (docs/telemetry.md): exceptions are not recorded, only their type.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

import anyio
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

# What the API returns while no SDK's provider is set.
_NO_SDK: Final = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
_tracer: tuple[trace.TracerProvider, trace.Tracer] | None = None


def tracer() -> trace.Tracer:
    """The tracer of the provider set now (a no-op one while none is set). Asked
    for each time, not kept: a provider set later, or replaced in a test, is used."""
    global _tracer
    provider = trace.get_tracer_provider()
    if _tracer is None or _tracer[0] is not provider:
        _tracer = (provider, provider.get_tracer("voice_membrane"))
    return _tracer[1]


# The GenAI semantic conventions' provider names, where ours differ.
_GENAI_PROVIDERS: Final = {"gemini": "gcp.gemini"}


def genai_provider(name: str) -> str:
    """``gen_ai.provider.name`` for a provider's name (``anthropic``, ``openai``,
    ``gcp.gemini``; an embedded source's kind: ``local``, ``replay``)."""
    kind = name.split(":", 1)[0]
    return _GENAI_PROVIDERS.get(kind, kind)


def epoch_ns(perf_ns: int) -> int:
    """A ``time.perf_counter_ns()`` stamp as wall-clock nanoseconds (what span
    times are), by the clocks' offset now."""
    return perf_ns + (time.time_ns() - time.perf_counter_ns())


def mark_error(span: Span, error_type: str) -> None:
    """An error status naming only the kind of error (its message may quote text)."""
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR))


@contextmanager
def stage_span(name: str, attributes: Mapping[str, AttributeValue] | None = None) -> Iterator[Span]:
    """A span current for the block (tasks started inside inherit it). An exception
    marks it with its type only; a cancellation (an interrupted turn) is not an
    error but is said (``voice.cancelled``)."""
    if isinstance(trace.get_tracer_provider(), _NO_SDK):
        yield trace.INVALID_SPAN  # no SDK: not even a context to attach (a few µs a span)
        return
    with tracer().start_as_current_span(
        name, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except anyio.get_cancelled_exc_class():
            span.set_attribute("voice.cancelled", True)
            raise
        except BaseException as exc:
            mark_error(span, _error_type(exc))
            raise


def _error_type(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return ",".join(sorted({_error_type(e) for e in exc.exceptions}))
    return type(exc).__qualname__

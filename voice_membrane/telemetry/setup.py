"""``--otel``: send the traces (docs/telemetry.md) to an OTLP collector.

``setup_tracing()`` installs the OpenTelemetry SDK's tracer provider with an
OTLP/HTTP exporter, both configured by the standard ``OTEL_*`` variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``,
``OTEL_BSP_*``…), and returns the callable that flushes and shuts it down. Any
face calls it once at start-up. The SDK and exporter are the ``otel`` extra;
without them every span is a no-op and this raises ``TelemetryError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

DEFAULT_SERVICE_NAME = "voice-membrane"
INSTALL_HINT = "pip install 'voice-membrane[otel]'"


class TelemetryError(Exception):
    """Tracing cannot be set up (the ``otel`` extra is not installed)."""


def setup_tracing(exporter: SpanExporter | None = None) -> Callable[[], None]:
    """Install a tracer provider exporting in batches to ``exporter`` (by default
    OTLP over HTTP, from the ``OTEL_*`` variables); returns its shutdown, which
    sends what is still buffered. Call it once, before the first turn."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise TelemetryError(f"tracing needs the otel extra ({INSTALL_HINT}): {exc}") from None
    if exporter is None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise TelemetryError(
                f"tracing needs the OTLP exporter ({INSTALL_HINT}): {exc}"
            ) from None
        exporter = OTLPSpanExporter()  # endpoint, headers, timeout: from OTEL_*
    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource)  # the sampler: OTEL_TRACES_SAMPLER
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider.shutdown

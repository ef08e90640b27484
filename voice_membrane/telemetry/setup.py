"""``--otel``: send the traces (docs/telemetry.md) to an OTLP collector.

``setup_tracing()`` installs the OpenTelemetry SDK's tracer provider with an
OTLP/HTTP exporter, both configured by the standard ``OTEL_*`` variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``,
``OTEL_BSP_*``…), and returns the callable that flushes and shuts it down. Any
face calls it once at start-up. The SDK and exporter are the ``otel`` extra;
without them every span is a no-op and this raises ``TelemetryError``.

A collector that cannot be reached never speaks into the transcript: the
exporter's retry warnings go to one line on stderr, said once, and the
shutdown waits at most ``FLUSH_S`` for the last spans before dropping them.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

DEFAULT_SERVICE_NAME = "voice-membrane"
INSTALL_HINT = "pip install 'voice-membrane[otel]'"
FLUSH_S = 2.0  # at exit: what the last spans get before they are dropped
ABORT_S = 1.0  # then: what an export in flight gets to see the shutdown
# The loggers the exporter and the batch processor warn on (each retry, each drop).
EXPORT_LOGGERS = ("opentelemetry.exporter", "opentelemetry.sdk._shared_internal")


class TelemetryError(Exception):
    """Tracing cannot be set up (the ``otel`` extra is not installed)."""


def setup_tracing(
    exporter: SpanExporter | None = None, *, warn: Callable[[str], None] | None = None
) -> Callable[[], None]:
    """Install a tracer provider exporting in batches to ``exporter`` (by default
    OTLP over HTTP, from the ``OTEL_*`` variables); returns its shutdown, which
    sends what is still buffered, for ``FLUSH_S`` at most. Call it once, before
    the first turn. ``warn``: where the one line about failed exports goes
    (default stderr)."""
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
    endpoint = getattr(exporter, "_endpoint", None)  # the OTLP exporter's resolved URL
    _route_export_warnings(_SaidOnce(endpoint if isinstance(endpoint, str) else None, warn))
    trace.set_tracer_provider(provider)
    return lambda: _bounded_shutdown(provider.shutdown, exporter.shutdown)


def _bounded_shutdown(shutdown: Callable[[], None], abort: Callable[[], None]) -> None:
    """``shutdown`` (flushing), in a thread given ``FLUSH_S``; past that the
    exporter is shut down under it, which ends its retries (the spans left are
    dropped), and the thread is given ``ABORT_S`` more, then left (a daemon)."""
    worker = threading.Thread(target=shutdown, name="otel-shutdown", daemon=True)
    worker.start()
    worker.join(FLUSH_S)
    if worker.is_alive():
        abort()
        worker.join(ABORT_S)


class _SaidOnce(logging.Handler):
    """The first export warning, as one line; the rest are the same story."""

    def __init__(self, endpoint: str | None, warn: Callable[[str], None] | None) -> None:
        super().__init__(logging.WARNING)
        self._endpoint = _shown(endpoint) if endpoint else "the OTLP endpoint"
        self._warn = warn or _stderr
        self._said = False

    def emit(self, record: logging.LogRecord) -> None:
        if self._said:
            return
        self._said = True
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is still a failed export
            message = ""
        self._warn(f"telemetry: {_what(message, self._endpoint)} (spans dropped)")


def _what(message: str, endpoint: str) -> str:
    status = re.search(r"\bcode: (\d{3})\b", message)
    if status:
        return f"the collector at {endpoint} refused the spans (HTTP {status.group(1)})"
    if "queue full" in message.lower():
        return "the span queue is full (OTEL_BSP_MAX_QUEUE_SIZE)"
    return f"cannot reach the collector at {endpoint}"


def _route_export_warnings(handler: logging.Handler) -> None:
    for name in EXPORT_LOGGERS:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if isinstance(h, _SaidOnce)]:
            logger.removeHandler(old)  # a second setup replaces the first's
        logger.addHandler(handler)
        logger.propagate = False  # not to the root's handler: stderr, every retry


def _stderr(line: str) -> None:
    sys.stderr.write(f"voice-membrane: {line}\n")
    sys.stderr.flush()


def _shown(endpoint: str) -> str:
    """The URL without a ``user:password@`` it may carry."""
    parts = urlsplit(endpoint)
    if parts.hostname is None or "@" not in parts.netloc:
        return endpoint
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))

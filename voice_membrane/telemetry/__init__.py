"""OpenTelemetry traces: ``spans`` gives every layer the tracer (only
``opentelemetry-api``); ``setup`` installs the SDK and its OTLP exporter for a
face's ``--otel`` (docs/telemetry.md)."""

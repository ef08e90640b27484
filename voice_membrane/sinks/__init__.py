"""Where audio goes: one module per sink, each behind ``AudioSink``."""

from .base import AudioSink, SinkError

__all__ = ["AudioSink", "SinkError"]

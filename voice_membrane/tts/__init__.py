"""Text-to-speech engines: one module per engine, each behind ``TtsEngine``."""

from .base import TtsEngine, TtsError

__all__ = ["TtsEngine", "TtsError"]

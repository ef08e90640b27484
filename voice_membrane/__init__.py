"""voice_membrane: make an LLM speak in real time."""

__version__ = "0.1.0"

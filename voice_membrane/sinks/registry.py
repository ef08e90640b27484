"""Create a sink by kind name, as pipeline files and the CLI name them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import AudioSink
from .null import NullSink
from .speaker import SpeakerSink
from .wav import WavSink

# speaker.py imports PortAudio only when a speaker is opened, so this is cheap.
SINKS: dict[str, Callable[..., AudioSink]] = {
    "speaker": SpeakerSink,
    "wav": WavSink,
    "null": NullSink,
}


def create_sink(kind: str, **options: Any) -> AudioSink:
    """A new (unopened) sink of ``kind`` built with ``options``; ValueError if unknown."""
    try:
        factory = SINKS[kind]
    except KeyError:
        raise ValueError(f"unknown sink {kind!r} (choose from: {', '.join(SINKS)})") from None
    return factory(**options)

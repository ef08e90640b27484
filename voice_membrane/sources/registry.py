"""Open a source by the name the CLI and pipeline files use: "microphone" or "wav:PATH"."""

from __future__ import annotations

from typing import Any

from .base import AudioSource
from .microphone import MicrophoneSource
from .wav_file import WavFileSource

KINDS = ("microphone", "wav:PATH")


def open_source(kind: str, **options: Any) -> AudioSource:
    """A new (unopened: use ``async with``) source of ``kind`` built with ``options``
    (``rate``, ``frame_ms``, and the kind's own: see ``MicrophoneSource`` and
    ``WavFileSource``). ValueError for an unknown kind or a ``wav:`` with no path."""
    if kind == "microphone":
        return MicrophoneSource(**options)
    if kind.startswith("wav:"):
        path = kind.removeprefix("wav:")
        if not path:
            raise ValueError("the wav source needs a path: wav:PATH")
        return WavFileSource(path, **options)
    raise ValueError(f"unknown audio source {kind!r} (choose from: {', '.join(KINDS)})")

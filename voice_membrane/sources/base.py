"""The interface every audio source implements, and the frames it delivers.

A source delivers the user's voice as fixed-size frames of mono int16 audio at
the rate asked for when it was made (it resamples whatever the device or file
has). Frames carry their place in the stream (``position``: samples delivered
before the frame's first one), so everything downstream counts samples, never
the wall clock, and gives the same results however fast the frames arrive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self

from ..vocab.audio import AudioChunk


class SourceError(RuntimeError):
    """The source cannot deliver audio: no device, an unreadable file, a
    microphone that stopped. The message is one line, ready for the user."""


@dataclass(frozen=True, slots=True)
class Frame(AudioChunk):
    """One frame of a source: an ``AudioChunk`` that knows its place.

    ``position`` is the index of its first sample in the stream (frames are
    contiguous: each starts where the previous one ended). ``captured_ns`` is
    ``time.perf_counter_ns()`` when its last sample became available: the
    device callback that delivered it (one input latency after it was spoken),
    or, for a file, the moment a microphone would have delivered it.
    """

    position: int
    captured_ns: int

    @property
    def end(self) -> int:
        """The position just after the frame's last sample."""
        return self.position + len(self.samples)


class AudioSource(Protocol):
    """Where the user's voice comes from. Use as an async context manager::

        async with source:
            async for frame in source.frames():
                ...

    ``frames()`` ends when the input does (a file); a device that stops raises
    ``SourceError`` once, and the source still closes cleanly. ``frames()``
    may be iterated once per opening.
    """

    name: str
    sample_rate: int  # what the frames are at
    frame_samples: int  # samples in every frame

    @property
    def dropped_samples(self) -> int:
        """Input lost because the reader fell behind (overruns); 0 for a file."""
        ...

    def frames(self) -> AsyncIterator[Frame]: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def frame_samples_for(rate: int, frame_ms: float) -> int:
    """Samples in a ``frame_ms`` frame at ``rate``; ValueError if not positive."""
    if rate <= 0:
        raise ValueError(f"sample rate must be positive, got {rate}")
    samples = round(rate * frame_ms / 1000)
    if samples < 1:
        raise ValueError(f"frame_ms must give at least one sample, got {frame_ms}")
    return samples

"""The interface every audio sink implements."""

from __future__ import annotations

from typing import Protocol

from ..vocab.audio import AudioChunk


class SinkError(RuntimeError):
    """The sink cannot take audio (no device, cannot write the file, …)."""


class AudioSink(Protocol):
    """Takes the audio of a session, turn after turn.

    ``await sink.open()`` once, then per turn any number of ``write`` calls,
    ending with ``drain()`` (wait until everything written has been heard) or
    ``stop()`` (interruption: silence within 100 ms, buffered audio discarded),
    and finally ``aclose()``.

    ``write`` is where backpressure comes from: a real-time sink blocks while its
    buffer is full, so a slow sink slows the producer and never drops audio. A
    sink converts audio whose ``sample_rate`` differs from its own
    (``audio.resample``).

    The audio written since ``open`` or the last ``drain``/``stop`` is one
    *utterance* (a turn's speech); ``first_played_ns`` says when playback took
    its first sample.

    ``pause()`` holds playback where it is (the user may be speaking over the
    assistant): silence within one block, nothing discarded, ``played_seconds``
    stands still, ``write`` waits once the buffer is full and ``drain`` until
    ``resume()`` plays on from the same sample. ``stop()`` ends a pause (what
    was held is discarded). A sink that is not real time has nothing to hold:
    its ``pause`` returns False and changes nothing.
    """

    name: str
    sample_rate: int  # the rate it plays or stores at

    async def open(self) -> None: ...

    async def write(self, chunk: AudioChunk) -> None: ...

    async def drain(self) -> None: ...

    async def stop(self) -> None: ...

    def pause(self) -> bool:
        """Hold playback; False if this sink cannot (it is not real time)."""
        ...

    def resume(self) -> None:
        """Play on after ``pause`` (nothing if not paused)."""
        ...

    @property
    def played_seconds(self) -> float:
        """Seconds of audio heard since ``open`` (written minus still buffered
        minus discarded by ``stop``); never decreases."""
        ...

    @property
    def first_played_ns(self) -> int | None:
        """``time.perf_counter_ns()`` when playback took the first sample of the
        current utterance, None until it has (or if ``stop`` discarded it first).
        A speaker: its device callback pulled the sample (it is heard one output
        latency later); a real-time null sink: its clock started playing it; a
        sink that is not real time: the ``write`` that took it. The value stays
        until the next utterance's first ``write``."""
        ...

    async def aclose(self) -> None: ...

"""Play through the sound card, in real time, with PortAudio.

The device pulls audio through a callback every ``BLOCK_SECONDS`` (10 ms) from
a bounded buffer this sink owns (``buffer_seconds``, 0.5 s by default):

- ``write`` pushes what fits and, while the buffer is full, polls every 5 ms
  (``anyio.sleep``: the event loop never blocks) until the callback has made
  room. That wait is the pipeline's backpressure; audio is never dropped.
- The callback plays silence when the buffer is empty (an underrun: speech
  arrives slower than real time) and notes, per block, when its last sample will
  be heard: now + the stream's output latency at that callback + the block.
- ``stop`` empties the buffer, so the next callback (within 10 ms) plays
  silence; what the device already holds (its output latency, 20-60 ms) still
  plays out. ``stop`` returns once it has (measured through PulseAudio: 65-80 ms
  after the call with sounddevice, 30-40 ms with PyAudio), so ``played_seconds``
  is final when it returns.
- ``drain`` waits until the buffer is empty and the device has played it all.
- ``pause`` makes the next callback (within 10 ms) play silence and take
  nothing; what the device already holds still plays (its output latency).
  The buffer keeps its audio, ``write`` and ``drain`` wait, and ``resume``
  plays on from the same sample. ``stop`` ends a pause.

``played_seconds``: the samples the callback has handed to the device whose
block has reached the speaker by now (handed at + latency + block length <= now),
over the stream's rate. Audio discarded by ``stop`` was never handed and never
counts; audio still inside the device does not count yet.

``first_played_ns``: when the callback took the utterance's first sample from
the buffer (``perf_counter_ns``, on the audio thread): up to one block after it
was written, and one output latency before it is heard. Not when ``write``
returns: a write of a whole sentence returns only once its end fits in the
buffer, long after its start began to play.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import anyio.to_thread

from ..infra.portaudio import BACKENDS, Backend
from ..vocab.audio import AudioChunk, Samples, resample
from ._portaudio import Stream, default_output_problem, open_stream
from ._ring import PlaybackBuffer
from .base import SinkError

BLOCK_SECONDS = 0.01  # one callback's audio: the granularity of stop and underruns
POLL_SECONDS = BLOCK_SECONDS / 2  # how often a waiting write/drain looks for room
STALL_SECONDS = 5.0  # no callback for this long: the device is gone, not slow


def speaker_available(backend: str = "sounddevice") -> str | None:
    """None if ``backend`` can play to a default output device, else a one-line reason."""
    return default_output_problem(backend)


Played = Callable[[Samples, int, int], None]
"""Told, on the audio thread, each block the device is handed (silence too),
its rate, and when its first sample is heard (``perf_counter_ns``): the echo
canceller's reference (``pipeline/echo_intake.py``)."""


class SpeakerSink:
    """Real-time playback on a PortAudio output device (see the module docstring)."""

    def __init__(
        self,
        backend: Backend = "sounddevice",
        sample_rate: int = 22050,
        device: str | int | None = None,
        buffer_seconds: float = 0.5,
    ) -> None:
        if backend not in BACKENDS:
            choices = ", ".join(BACKENDS)
            raise ValueError(f"unknown speaker backend {backend!r} (choose from: {choices})")
        if buffer_seconds <= BLOCK_SECONDS:
            raise ValueError(f"buffer_seconds must exceed {BLOCK_SECONDS}, got {buffer_seconds}")
        self.name = "speaker"
        self.backend: Backend = backend
        self.sample_rate = sample_rate  # becomes the device's rate if it refuses this one
        self.device = device
        self.buffer_seconds = buffer_seconds
        self._stream: Stream | None = None
        self._buffer: PlaybackBuffer | None = None
        self._opened_at = 0.0
        self._played = 0.0  # latest played_seconds, so it never decreases
        self._utterance_open = False  # a write since open / the last drain or stop
        self.on_played: Played | None = None

    @property
    def output_latency(self) -> float:
        """The device's reported output latency in seconds (0 before ``open``)."""
        return self._stream.latency if self._stream else 0.0

    async def open(self) -> None:
        if self._stream is not None:
            raise SinkError("speaker sink is already open")

        def fill(out: Samples, delay: float) -> None:
            buffer = self._buffer  # set before the stream starts, cleared after it closes
            if buffer is None:
                out[:] = 0
            else:
                buffer.fill(out, time.monotonic(), delay)
            if (played := self.on_played) is not None:
                played(out, self.sample_rate, time.perf_counter_ns() + round(delay * 1e9))

        stream = await anyio.to_thread.run_sync(
            open_stream, self.backend, self.device, self.sample_rate, BLOCK_SECONDS, fill
        )
        self.sample_rate = stream.sample_rate
        capacity = max(1, round(self.buffer_seconds * stream.sample_rate))
        self._buffer = PlaybackBuffer(capacity, stream.sample_rate)
        try:
            await anyio.to_thread.run_sync(stream.start)
        except Exception as exc:  # PortAudioError / OSError from the device
            await anyio.to_thread.run_sync(stream.close)
            self._buffer = None
            raise SinkError(f"cannot start audio output: {exc}") from exc
        self._stream = stream
        self._opened_at = time.monotonic()
        self._played = 0.0
        self._utterance_open = False

    async def write(self, chunk: AudioChunk) -> None:
        buffer = self._require_open()
        if not self._utterance_open:
            self._utterance_open = True
            buffer.mark_start()
        samples = resample(chunk.samples, chunk.sample_rate, self.sample_rate)
        pos = buffer.push(samples)
        while pos < len(samples):
            await self._wait_for_device(buffer)
            pos += buffer.push(samples[pos:])

    async def drain(self) -> None:
        buffer = self._require_open()
        while buffer.in_flight(time.monotonic()) > 0:
            await self._wait_for_device(buffer)
        self._utterance_open = False

    def pause(self) -> bool:
        self._require_open().set_paused(True)
        return True

    def resume(self) -> None:
        if self._buffer is not None:
            self._buffer.set_paused(False)

    async def stop(self) -> None:
        """Discard what is buffered and wait for silence. Cancel writers first (a
        write still waiting for room would go on filling the buffer)."""
        buffer = self._require_open()
        buffer.clear()
        self._utterance_open = False
        # Audio already handed to the device cannot be recalled; wait until it has
        # played (one output latency) so that played_seconds is final on return.
        # The clock needs no callback to get there, so this ends even if the
        # device has died, and stop never raises for it (it runs after errors).
        handed = buffer.handed
        while buffer.heard(time.monotonic()) < handed:
            await anyio.sleep(POLL_SECONDS)

    @property
    def played_seconds(self) -> float:
        if self._stream is not None and self._buffer is not None:
            heard = self._buffer.heard(time.monotonic()) / self.sample_rate
            self._played = max(self._played, heard)
        return self._played

    @property
    def first_played_ns(self) -> int | None:
        return self._buffer.first_taken_ns if self._buffer is not None else None

    async def aclose(self) -> None:
        if self._stream is None:
            return
        _ = self.played_seconds  # frozen from here: closing drops what the device holds
        stream, self._stream = self._stream, None
        await anyio.to_thread.run_sync(stream.close)
        self._buffer = None

    def _require_open(self) -> PlaybackBuffer:
        if self._stream is None or self._buffer is None:
            raise SinkError("speaker sink is not open")
        return self._buffer

    async def _wait_for_device(self, buffer: PlaybackBuffer) -> None:
        """Sleep one poll period; SinkError if the device has stopped calling back."""
        await anyio.sleep(POLL_SECONDS)
        stream = self._stream
        if stream is None:
            raise SinkError("speaker sink was closed while waiting for the device")
        if not stream.is_active():
            raise SinkError("audio output stopped unexpectedly")
        last = buffer.last_fill or self._opened_at
        if time.monotonic() - last > STALL_SECONDS:
            raise SinkError(f"audio device stalled: no callback for {STALL_SECONDS:.0f} s")

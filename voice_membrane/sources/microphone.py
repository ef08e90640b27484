"""The microphone, through PortAudio (sounddevice, or PyAudio as the alternative).

The device calls back every ``BLOCK_SECONDS`` (10 ms) on its own thread with
what it recorded; the callback mixes it to mono and puts it in a bounded buffer
(``_capture.CaptureBuffer``, ``buffer_seconds`` deep, 2 s by default) and
never waits. ``frames()`` takes what is there, converts it to ``rate``
(``_resample.StreamResampler``; PortAudio is first asked for ``rate`` itself,
and PulseAudio converts well) and cuts it into frames.

- Overruns: if the reader falls more than ``buffer_seconds`` behind, whole
  blocks are dropped, never waited for. ``overruns`` counts them and
  ``dropped_samples`` says how much audio (at ``rate``) was lost; PortAudio's
  own input overflows are counted in ``device_overflows``. Frames stay
  contiguous over a loss (positions count delivered audio); ``captured_ns``
  keeps the true time.
- Waiting: the reader sleeps about as long as the device needs to record the
  rest of the next frame, so a frame is handed on within a few ms of arriving
  without polling in a tight loop.
- A device that goes away (the stream stops, or no callback for
  ``STALL_SECONDS``) raises ``SourceError("the microphone … stopped: …")`` once;
  closing the source afterwards is quiet.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

import anyio
import anyio.to_thread

from ..vocab.audio import Samples
from ._capture import CaptureBuffer
from ._framer import Framer
from ._portaudio import Stream, default_input_problem, open_stream, resolve
from ._resample import StreamResampler, to_int16
from .base import Frame, SourceError, frame_samples_for

BLOCK_SECONDS = 0.01  # audio per device callback
STALL_SECONDS = 5.0  # no callback for this long: the device is gone, not slow
MIN_WAIT = 0.002  # the reader's shortest and longest sleep while waiting for audio
MAX_WAIT = 0.05


def input_available(backend: str = "auto") -> str | None:
    """None if ``backend`` can record from a default input device, else a one-line
    reason (naming ``--input FILE.wav`` when there is no microphone at all)."""
    return default_input_problem(backend)


class MicrophoneSource:
    """Frames from a PortAudio input device (see the module docstring).

    ``device``: None for the default input, a device index, or part of its name.
    """

    def __init__(
        self,
        device: str | int | None = None,
        *,
        rate: int = 16000,
        backend: str = "auto",
        frame_ms: float = 20.0,
        buffer_seconds: float = 2.0,
    ) -> None:
        if buffer_seconds <= BLOCK_SECONDS:
            raise ValueError(f"buffer_seconds must exceed {BLOCK_SECONDS}, got {buffer_seconds}")
        self.backend = resolve(backend)
        self.device = device
        self.name = "microphone"
        self.sample_rate = rate
        self.frame_samples = frame_samples_for(rate, frame_ms)
        self.buffer_seconds = buffer_seconds
        self.device_name = ""  # once open
        self.device_rate = 0  # the rate the device records at, once open
        self._stream: Stream | None = None
        self._buffer: CaptureBuffer | None = None
        self._opened_ns = 0
        self._started = False

    @property
    def input_latency(self) -> float:
        """The device's reported input latency in seconds (0 before opening):
        how long before its callback a sample was spoken."""
        return self._stream.latency if self._stream else 0.0

    @property
    def overruns(self) -> int:
        return self._buffer.overruns if self._buffer else 0

    @property
    def device_overflows(self) -> int:
        return self._buffer.device_overflows if self._buffer else 0

    @property
    def dropped_samples(self) -> int:
        if not self._buffer or not self.device_rate:
            return 0
        return round(self._buffer.dropped * self.sample_rate / self.device_rate)

    async def __aenter__(self) -> Self:
        if self._stream is not None:
            raise SourceError("the microphone is already open")
        holder: list[CaptureBuffer] = []

        def deliver(samples: Samples, overflow: bool) -> None:
            if holder:  # set before the stream starts
                holder[0].put(samples, time.perf_counter_ns(), overflow)

        stream = await anyio.to_thread.run_sync(
            open_stream, self.backend, self.device, self.sample_rate, BLOCK_SECONDS, deliver
        )
        buffer = CaptureBuffer(max(1, round(self.buffer_seconds * stream.sample_rate)))
        holder.append(buffer)
        try:
            await anyio.to_thread.run_sync(stream.start)
        except Exception as exc:  # PortAudioError / OSError from the device
            await anyio.to_thread.run_sync(stream.close)
            reason = " ".join(str(exc).split())
            raise SourceError(f"cannot start the microphone {stream.name!r}: {reason}") from exc
        self._stream, self._buffer = stream, buffer
        self.device_name, self.device_rate = stream.name, stream.sample_rate
        self._opened_ns = time.perf_counter_ns()
        self._started = False
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with anyio.CancelScope(shield=True):  # the device is released even when cancelled
                await anyio.to_thread.run_sync(stream.close)

    async def frames(self) -> AsyncIterator[Frame]:
        stream, buffer = self._stream, self._buffer
        if stream is None or buffer is None:
            raise SourceError("the microphone is not open (use async with)")
        if self._started:
            raise SourceError("frames() can be iterated once per opening")
        self._started = True
        rate, n = self.sample_rate, self.frame_samples
        framer = Framer(n)
        resampler = StreamResampler(stream.sample_rate, rate)
        ratio = stream.sample_rate / rate
        position = 0
        taken = 0  # device samples taken from the buffer
        arrivals: list[tuple[int, int]] = []  # (device samples up to a block's end, ns)
        while True:
            samples, new = buffer.take()
            arrivals.extend(new)
            taken += len(samples)
            if len(samples):
                ready = framer.feed(to_int16(resampler.feed(samples)))
            else:
                ready = []
                self._check_alive(stream, buffer)
            for frame in ready:
                end = position + n
                yield Frame(
                    frame, rate, position=position, captured_ns=_when(arrivals, end * ratio)
                )
                position = end
            # Sleep about as long as the device needs to record the rest of a frame.
            missing = (n - framer.pending) / rate
            await anyio.sleep(min(MAX_WAIT, max(MIN_WAIT, missing)))

    def _check_alive(self, stream: Stream, buffer: CaptureBuffer) -> None:
        where = f"the microphone {self.device_name!r} stopped"
        if not stream.is_active():
            raise SourceError(
                f"{where}: its input stream ended (unplugged, or the audio server went away)"
            )
        last = buffer.last_put_ns or self._opened_ns
        if time.perf_counter_ns() - last > STALL_SECONDS * 1e9:
            raise SourceError(f"{where}: no audio from it for {STALL_SECONDS:.0f} s")


def _when(arrivals: list[tuple[int, int]], device_end: float) -> int:
    """The arrival time of the block holding device sample ``device_end``; blocks
    before it are dropped from ``arrivals``."""
    while len(arrivals) > 1 and arrivals[0][0] < device_end:
        arrivals.pop(0)
    return arrivals[0][1] if arrivals else time.perf_counter_ns()

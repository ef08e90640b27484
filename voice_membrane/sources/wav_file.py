"""A sound file played as if it came from a microphone.

Whatever soundfile (libsndfile) reads — WAV of 8/16/24/32-bit integers or
floats, FLAC, OGG — is read in blocks, mixed to mono (the mean of its
channels), converted to ``rate`` (``_resample.StreamResampler``: low-pass, then
interpolation) and cut into frames. Float samples beyond full scale are clipped.

``realtime=True`` paces the frames as a microphone delivers them: frame i comes
when its last sample "was spoken", at start + (i + 1) frame durations, an
absolute schedule (``anyio.sleep_until``) so nothing drifts over a long file; a
consumer that falls behind gets the late frames at once. ``realtime=False``
yields them as fast as they are taken (tests, bench).

``lead_silence_s`` and ``tail_silence_s`` add silence before and after the file:
a real microphone keeps sending silence after the user stops, and a detector
needs it to see the end of the last utterance.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.lowlevel
import anyio.to_thread
import numpy as np

from ..vocab.audio import Samples
from ._framer import Framer
from ._resample import StreamResampler, to_int16
from .base import Frame, SourceError, frame_samples_for

READ_SECONDS = 0.5  # of the file per block read (in a worker thread)
DEFAULT_TAIL_SILENCE_S = 1.0  # more than any end-of-speech silence setting


class WavFileSource:
    """Frames of a sound file (see the module docstring)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        rate: int = 16000,
        realtime: bool = True,
        frame_ms: float = 20.0,
        lead_silence_s: float = 0.0,
        tail_silence_s: float = DEFAULT_TAIL_SILENCE_S,
    ) -> None:
        if lead_silence_s < 0 or tail_silence_s < 0:
            raise ValueError("lead_silence_s and tail_silence_s cannot be negative")
        self.path = Path(path)
        self.name = f"wav:{self.path}"
        self.sample_rate = rate
        self.frame_samples = frame_samples_for(rate, frame_ms)
        self.realtime = realtime
        self.lead_silence_s = lead_silence_s
        self.tail_silence_s = tail_silence_s
        self.file_rate = 0  # the file's own rate and channels, once open
        self.file_channels = 0
        self.file_seconds = 0.0
        self._file: Any = None
        self._started = False

    @property
    def dropped_samples(self) -> int:
        return 0  # a file waits for its reader

    async def __aenter__(self) -> Self:
        if self._file is not None:
            raise SourceError(f"{self.path}: the source is already open")
        self._file = await anyio.to_thread.run_sync(self._open)
        self._started = False
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()

    def check(self) -> None:
        """Open the file and close it again: ``SourceError`` (one line) now if it
        is missing, empty or no sound file, before anything slow starts."""
        self._open().close()

    def _open(self) -> Any:
        where = str(self.path)
        if self.path.is_dir():
            raise SourceError(f"{where}: is a directory, not a sound file")
        if not self.path.exists():
            raise SourceError(f"{where}: no such file")
        try:
            file = _soundfile().SoundFile(where)
        except (RuntimeError, OSError, ValueError) as exc:
            reason = _reason(exc)
            raise SourceError(f"{where}: not a sound file that can be read ({reason})") from exc
        if file.frames == 0 or file.samplerate <= 0:
            file.close()
            raise SourceError(f"{where}: the file holds no audio")
        self.file_rate = int(file.samplerate)
        self.file_channels = int(file.channels)
        self.file_seconds = file.frames / file.samplerate
        return file

    async def frames(self) -> AsyncIterator[Frame]:
        file = self._file
        if file is None:
            raise SourceError(f"{self.path}: the source is not open (use async with)")
        if self._started:
            raise SourceError(f"{self.path}: frames() can be iterated once per opening")
        self._started = True
        rate, n = self.sample_rate, self.frame_samples
        framer = Framer(n)
        resampler = StreamResampler(self.file_rate, rate)
        block = max(1, round(READ_SECONDS * self.file_rate))
        pieces = [_silence(self.lead_silence_s, rate)]
        start = anyio.current_time()
        position = 0
        reading = True
        while pieces or reading:
            if pieces:
                samples = pieces.pop(0)
            else:
                data = await anyio.to_thread.run_sync(self._read, file, block)
                if data is None:
                    reading = False
                    tail = to_int16(resampler.flush())
                    pieces = [tail, _silence(self.tail_silence_s, rate)]
                    continue
                samples = to_int16(resampler.feed(data))
            ready = framer.feed(samples)
            if not pieces and not reading:
                ready += framer.flush()
            for frame in ready:
                if self.realtime:
                    await anyio.sleep_until(start + (position + n) / rate)
                else:
                    await anyio.lowlevel.checkpoint()  # others run; cancellation reaches us
                yield Frame(frame, rate, position=position, captured_ns=time.perf_counter_ns())
                position += n

    def _read(self, file: Any, block: int) -> Any:
        """The next block as mono float64 in int16 units, None at the end."""
        try:
            data = file.read(block, dtype="float64", always_2d=True)
        except (RuntimeError, OSError, ValueError) as exc:
            raise SourceError(f"{self.path}: reading failed ({_reason(exc)})") from exc
        if len(data) == 0:
            return None
        # libsndfile scales every integer width to [-1, 1) by its full scale, so
        # x * 32768 is exact for 8 and 16 bits; floats may exceed 1 and are clipped later.
        return data.mean(axis=1) * 32768.0


def _soundfile() -> Any:
    """soundfile, imported when a file is opened: it loads libsndfile (its
    LibsndfileError is a RuntimeError)."""
    try:
        return importlib.import_module("soundfile")
    except (ImportError, OSError) as exc:
        raise SourceError(
            f"reading sound files needs soundfile (pip install soundfile): {exc}"
        ) from exc


def _silence(seconds: float, rate: int) -> Samples:
    return np.zeros(round(seconds * rate), dtype=np.int16)


def _reason(exc: BaseException) -> str:
    """libsndfile's message on one line, without the path it repeats."""
    text = " ".join(str(exc).split())
    if text.startswith("Error opening") and ": " in text:
        text = text.split(": ", 1)[1]
    return text or type(exc).__name__

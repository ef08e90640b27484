"""Write the session's audio to a 16-bit mono WAV file (not real time)."""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import Any, BinaryIO

from ..vocab.audio import AudioChunk, resample
from .base import SinkError

EMPTY_FILE_RATE = 24000  # the header's rate when a session ends without any audio


class WavSink:
    """Every turn's audio, one after another, in one WAV file.

    ``write`` returns at once and ``played_seconds`` is the seconds written: a file
    has no playback to wait for, so ``drain`` and ``stop`` have nothing to do (they
    only end the utterance). ``first_played_ns`` is when the utterance's first
    audio was written to the file: when the pipeline delivered it, not when
    anyone would hear it (there is no playback clock). The header is finalised
    by ``aclose``.
    """

    def __init__(self, path: str | os.PathLike[str], sample_rate: int | None = None) -> None:
        self.name = "wav"
        self.path = Path(path)
        # 0 until known: with sample_rate=None the file takes its first chunk's rate.
        self.sample_rate = sample_rate or 0
        self._configured_rate = sample_rate or 0
        self._file: BinaryIO | None = None
        self._wav: Any = None  # soundfile.SoundFile, created at the first write
        self._written = 0  # samples, at self.sample_rate
        self._soundfile: Any = None
        self._utterance_open = False
        self._first_ns: int | None = None

    async def open(self) -> None:
        if self._file is not None:
            raise SinkError(f"WAV sink {self.path} is already open")
        # The file is opened here, not at the first write, so a bad path fails early.
        try:
            self._file = self.path.open("wb")
        except OSError as exc:
            raise SinkError(f"cannot write {self.path}: {exc.strerror or exc}") from exc
        self.sample_rate = self._configured_rate
        self._written = 0
        self._utterance_open = False
        self._first_ns = None
        # Imported now (it loads libsndfile, ~35 ms), not in the first write, where it
        # would add to the first-audio latency.
        self._soundfile = _import_soundfile()

    async def write(self, chunk: AudioChunk) -> None:
        if self._file is None:
            raise SinkError(f"WAV sink {self.path} is not open")
        if self._wav is None:
            self.sample_rate = self.sample_rate or chunk.sample_rate
            self._wav = self._start_wav(self._file)
        samples = resample(chunk.samples, chunk.sample_rate, self.sample_rate)
        try:
            self._wav.write(samples)
        except Exception as exc:  # soundfile's LibsndfileError or OSError: disk full, …
            raise SinkError(f"cannot write {self.path}: {exc}") from exc
        self._written += len(samples)
        if not self._utterance_open:
            self._utterance_open = True
            self._first_ns = time.perf_counter_ns()

    async def drain(self) -> None:
        self._utterance_open = False

    async def stop(self) -> None:
        self._utterance_open = False  # everything written is already in the file

    def pause(self) -> bool:
        return False  # a file has no playback to hold

    def resume(self) -> None:
        pass

    @property
    def first_played_ns(self) -> int | None:
        return self._first_ns

    @property
    def played_seconds(self) -> float:
        return self._written / self.sample_rate if self.sample_rate else 0.0

    async def aclose(self) -> None:
        file, self._file = self._file, None
        if file is None:
            return
        try:
            if self._wav is None:  # no audio at all: still leave a valid, empty WAV
                self.sample_rate = self.sample_rate or EMPTY_FILE_RATE
                self._wav = self._start_wav(file)
            self._wav.close()  # writes the final header sizes
        except Exception as exc:
            raise SinkError(f"cannot finish {self.path}: {exc}") from exc
        finally:
            self._wav = None
            file.close()

    def _start_wav(self, file: BinaryIO) -> Any:
        sf = self._soundfile or _import_soundfile()
        return sf.SoundFile(
            file, mode="w", samplerate=self.sample_rate, channels=1, format="WAV", subtype="PCM_16"
        )


def _import_soundfile() -> Any:
    try:
        return importlib.import_module("soundfile")  # lazily: it loads libsndfile
    except (ImportError, OSError) as exc:
        raise SinkError(f"the WAV sink needs soundfile (pip install soundfile): {exc}") from exc

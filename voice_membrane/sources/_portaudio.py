"""Callback input streams on PortAudio, through sounddevice or PyAudio.

The input twin of ``sinks/_portaudio.py``; what both directions need is in
``infra/portaudio.py``. Both libraries are imported lazily: importing either
loads libportaudio, which raises OSError on a machine without it, and that must
become a ``SourceError`` (or a reason string), not a crash when voice_membrane
is imported.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from ..infra.portaudio import (
    BACKENDS,
    SUGGESTED_LATENCY,
    Backend,
    PortAudioError,
    first_that_opens,
    formats_to_try,
    has_default_device,
    import_backend,
    pyaudio_device,
    quiet_pyaudio,
)
from ..vocab.audio import Samples
from .base import SourceError

Deliver = Callable[[Samples, bool], None]
"""Called on the audio thread with a mono block and whether PortAudio lost input
before it (an input overflow)."""

NO_INPUT = (
    "no microphone: PortAudio found no audio input device "
    "(to listen to a recording instead: --input FILE.wav)"
)


def resolve(backend: str) -> Backend:
    """``backend``, with "auto" made the first one installed (sounddevice first)."""
    if backend == "auto":
        for name in BACKENDS:
            if importlib.util.find_spec(name) is not None:
                return name
        return "sounddevice"  # load() will say it is missing
    if backend not in BACKENDS:
        choices = ", ".join(("auto", *BACKENDS))
        raise SourceError(f"unknown microphone backend {backend!r} (choose from: {choices})")
    return backend


def load(backend: Backend) -> ModuleType:
    """The backend's module, or SourceError saying why it cannot be used."""
    try:
        return import_backend(backend, "microphone")
    except PortAudioError as exc:
        raise SourceError(str(exc)) from exc


@dataclass
class Stream:
    """An opened (not yet started) callback input stream."""

    name: str  # the device's name
    sample_rate: int
    channels: int
    latency: float  # the device's reported input latency, seconds
    start: Callable[[], None]
    is_active: Callable[[], bool]
    close: Callable[[], None]


def default_input_problem(backend: str) -> str | None:
    """None if ``backend`` has a default input device, else a one-line reason."""
    try:
        name = resolve(backend)
        module = load(name)
    except SourceError as exc:
        return str(exc)
    return None if has_default_device(module, name, "input") else NO_INPUT


def open_stream(
    backend: Backend,
    device: str | int | None,
    sample_rate: int,
    block_seconds: float,
    deliver: Deliver,
) -> Stream:
    """Open an int16 callback stream at ``sample_rate``, or the closest the device
    accepts: its own default rate, then two channels (mixed to mono here).
    Each callback brings about ``block_seconds`` of audio."""
    module = load(backend)
    opener = _open_sounddevice if backend == "sounddevice" else _open_pyaudio
    return opener(module, device, sample_rate, block_seconds, deliver)


def _first_that_opens(
    name: str, formats: list[tuple[int, int]], attempt: Callable[[int, int], Stream]
) -> Stream:
    try:
        return first_that_opens(formats, attempt)
    except PortAudioError as exc:
        raise SourceError(f"cannot open the microphone {name!r}: {exc}") from None


def to_mono(data: Any, channels: int) -> Samples:
    """Interleaved int16 bytes of ``channels`` channels as mono (their mean)."""
    samples = np.frombuffer(data, dtype=np.int16)
    if channels == 1:
        return samples.copy()  # the device reuses its buffer after the callback
    mixed = samples.reshape(-1, channels).mean(axis=1)
    out: Samples = np.round(mixed).astype(np.int16)
    return out


def _open_sounddevice(
    sd: ModuleType,
    device: str | int | None,
    sample_rate: int,
    block_seconds: float,
    deliver: Deliver,
) -> Stream:
    try:
        info: dict[str, Any] = sd.query_devices(device, kind="input")
    except ValueError as exc:  # no such device name or index, or not an input
        raise SourceError(f"microphone {device!r}: {' '.join(str(exc).split())}") from exc
    except Exception as exc:  # PortAudioError: no default input device
        raise SourceError(NO_INPUT if device is None else f"microphone {device!r}: {exc}") from exc
    name = str(info["name"])

    def attempt(rate: int, channels: int) -> Stream:
        def callback(indata: Any, frames: int, time: Any, status: Any) -> None:
            deliver(to_mono(indata, channels), bool(status.input_overflow))

        stream = sd.RawInputStream(
            samplerate=rate,
            channels=channels,
            dtype="int16",
            blocksize=max(1, round(rate * block_seconds)),
            latency=SUGGESTED_LATENCY,
            device=device,
            callback=callback,
        )

        def close() -> None:
            stream.abort(ignore_errors=True)
            stream.close(ignore_errors=True)

        latency = float(stream.latency)
        return Stream(
            name, rate, channels, latency, stream.start, lambda: bool(stream.active), close
        )

    candidates = formats_to_try(sample_rate, int(info["default_samplerate"]))
    return _first_that_opens(name, candidates, attempt)


def _open_pyaudio(
    pyaudio: ModuleType,
    device: str | int | None,
    sample_rate: int,
    block_seconds: float,
    deliver: Deliver,
) -> Stream:
    pa = quiet_pyaudio(pyaudio)
    try:
        index = pyaudio_device(pa, device, "input")
        info: dict[str, Any] = pa.get_device_info_by_index(index)
    except (OSError, ValueError) as exc:
        pa.terminate()
        raise SourceError(NO_INPUT if device is None else f"microphone {device!r}: {exc}") from exc
    name = str(info["name"])
    overflow_flag = int(pyaudio.paInputOverflow)

    def attempt(rate: int, channels: int) -> Stream:
        def callback(
            in_data: Any, frames: int, time: dict[str, float], status: int
        ) -> tuple[None, int]:
            deliver(to_mono(in_data, channels), bool(status & overflow_flag))
            return None, int(pyaudio.paContinue)

        stream = pa.open(
            format=pyaudio.paInt16,
            channels=channels,
            rate=rate,
            input=True,
            input_device_index=index,
            frames_per_buffer=max(1, round(rate * block_seconds)),
            stream_callback=callback,
            start=False,
        )

        def close() -> None:
            try:
                stream.close()
            except OSError:
                pass  # the device is already gone
            finally:
                pa.terminate()

        def active() -> bool:
            return bool(stream.is_active())

        latency = float(stream.get_input_latency())
        return Stream(name, rate, channels, latency, stream.start_stream, active, close)

    try:
        candidates = formats_to_try(sample_rate, int(info["defaultSampleRate"]))
        return _first_that_opens(name, candidates, attempt)
    except SourceError:
        pa.terminate()
        raise

"""Callback output streams on PortAudio, through sounddevice or PyAudio.

Both libraries are imported here, lazily: importing either loads libportaudio,
which raises OSError on a machine without it, and that must become a
``SinkError`` (or a reason string), not a crash when voice_membrane is imported.
"""

from __future__ import annotations

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
from .base import SinkError

Fill = Callable[[Samples, float], None]
"""Called on the audio thread with a mono block to fill and the seconds until
its first sample is heard."""

NO_DEVICE = "no audio output device (PortAudio found none)"


def load(backend: str) -> ModuleType:
    """The backend's module, or SinkError saying why it cannot be used."""
    if backend not in BACKENDS:
        raise SinkError(f"unknown speaker backend {backend!r} (choose from: {', '.join(BACKENDS)})")
    try:
        return import_backend(backend, "speaker")
    except PortAudioError as exc:
        raise SinkError(str(exc)) from exc


@dataclass
class Stream:
    """An opened (not yet started) callback output stream."""

    sample_rate: int
    channels: int
    latency: float  # the device's reported output latency, seconds
    start: Callable[[], None]
    is_active: Callable[[], bool]
    close: Callable[[], None]


def default_output_problem(backend: str) -> str | None:
    """None if ``backend`` has a default output device, else a one-line reason."""
    try:
        module = load(backend)
    except SinkError as exc:
        return str(exc)
    return None if has_default_device(module, backend, "output") else NO_DEVICE


def open_stream(
    backend: Backend,
    device: str | int | None,
    sample_rate: int,
    block_seconds: float,
    fill: Fill,
) -> Stream:
    """Open a mono int16 callback stream at ``sample_rate``, or the closest the
    device accepts: its own default rate, then two channels (mono copied to each).
    Each callback asks for ``block_seconds`` of audio."""
    module = load(backend)
    opener = _open_sounddevice if backend == "sounddevice" else _open_pyaudio
    return opener(module, device, sample_rate, block_seconds, fill)


def _first_that_opens(
    name: str, formats: list[tuple[int, int]], attempt: Callable[[int, int], Stream]
) -> Stream:
    try:
        return first_that_opens(formats, attempt)
    except PortAudioError as exc:
        raise SinkError(f"cannot open audio output {name!r}: {exc}") from None


def _delay(dac_time: float, current_time: float, fallback: float) -> float:
    # Some host APIs report zero timestamps; trust only a plausible difference.
    delay = dac_time - current_time
    return delay if 0.0 <= delay < 1.0 else fallback


def _open_sounddevice(
    sd: ModuleType, device: str | int | None, sample_rate: int, block_seconds: float, fill: Fill
) -> Stream:
    try:
        info: dict[str, Any] = sd.query_devices(device, kind="output")
    except ValueError as exc:  # no such device name or index
        raise SinkError(f"audio output device {device!r}: {exc}") from exc
    except Exception as exc:  # PortAudioError: no default output device
        raise SinkError(NO_DEVICE if device is None else f"{device!r}: {exc}") from exc

    def attempt(rate: int, channels: int) -> Stream:
        latency = SUGGESTED_LATENCY  # replaced by the stream's own figure once open
        scratch = np.zeros(max(1, round(rate * block_seconds)), dtype=np.int16)

        def callback(outdata: Any, frames: int, time: Any, status: Any) -> None:
            delay = _delay(time.outputBufferDacTime, time.currentTime, latency)
            if channels == 1:
                fill(outdata[:, 0], delay)
                return
            mono = scratch[:frames] if frames <= len(scratch) else np.zeros(frames, np.int16)
            fill(mono, delay)
            outdata[:] = mono[:, None]

        stream = sd.OutputStream(
            samplerate=rate,
            channels=channels,
            dtype="int16",
            blocksize=len(scratch),
            latency=SUGGESTED_LATENCY,
            device=device,
            callback=callback,
        )
        latency = float(stream.latency)

        def close() -> None:
            stream.abort(ignore_errors=True)  # drop what the device still holds
            stream.close(ignore_errors=True)

        return Stream(rate, channels, latency, stream.start, lambda: bool(stream.active), close)

    candidates = formats_to_try(sample_rate, int(info["default_samplerate"]))
    return _first_that_opens(str(info["name"]), candidates, attempt)


def _open_pyaudio(
    pyaudio: ModuleType,
    device: str | int | None,
    sample_rate: int,
    block_seconds: float,
    fill: Fill,
) -> Stream:
    pa = quiet_pyaudio(pyaudio)
    try:
        index = pyaudio_device(pa, device, "output")
        info: dict[str, Any] = pa.get_device_info_by_index(index)
    except (OSError, ValueError) as exc:
        pa.terminate()
        raise SinkError(NO_DEVICE if device is None else f"{device!r}: {exc}") from exc

    def attempt(rate: int, channels: int) -> Stream:
        latency = SUGGESTED_LATENCY  # replaced by the stream's own figure once open

        def callback(
            in_data: Any, frames: int, time: dict[str, float], status: int
        ) -> tuple[bytes, int]:
            delay = _delay(time["output_buffer_dac_time"], time["current_time"], latency)
            mono = np.zeros(frames, dtype=np.int16)
            fill(mono, delay)
            data = mono if channels == 1 else np.repeat(mono, channels)
            return data.tobytes(), int(pyaudio.paContinue)

        # PyAudio asks PortAudio for the device's low latency; it has no option for more.
        stream = pa.open(
            format=pyaudio.paInt16,
            channels=channels,
            rate=rate,
            output=True,
            output_device_index=index,
            frames_per_buffer=max(1, round(rate * block_seconds)),
            stream_callback=callback,
            start=False,
        )
        latency = float(stream.get_output_latency())

        def close() -> None:
            try:
                stream.close()  # closing an active stream aborts it: pending audio dropped
            except OSError:
                pass  # the device is already gone
            finally:
                pa.terminate()

        return Stream(
            rate, channels, latency, stream.start_stream, lambda: bool(stream.is_active()), close
        )

    try:
        candidates = formats_to_try(sample_rate, int(info["defaultSampleRate"]))
        return _first_that_opens(str(info["name"]), candidates, attempt)
    except SinkError:
        pa.terminate()
        raise

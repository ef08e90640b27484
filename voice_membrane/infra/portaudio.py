"""What PortAudio's two Python bindings (sounddevice, PyAudio) need in both
directions, for the speaker (``sinks/_portaudio.py``) and the microphone
(``sources/_portaudio.py``): importing a backend, a quiet PyAudio, the formats
to try, and finding a device. Each side words its own errors from
``PortAudioError``.

Backends are imported only when called: importing either loads libportaudio,
which raises OSError on a machine without it.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal, TypeVar

Backend = Literal["sounddevice", "pyaudio"]
BACKENDS: tuple[Backend, ...] = ("sounddevice", "pyaudio")
Direction = Literal["input", "output"]

# PortAudio's "low" suggested latency (~10-20 ms) breaks up in bursts through
# PulseAudio's ALSA plugin, both ways; 40 ms (its "high" there) is steady, and a
# speaker's stop still reaches silence in ~70-80 ms.
SUGGESTED_LATENCY = 0.04

T = TypeVar("T")


class PortAudioError(RuntimeError):
    """A backend or device cannot be used (one line, for the caller to word)."""


def import_backend(backend: Backend, role: str) -> ModuleType:
    """The backend's module; ``PortAudioError`` naming ``role`` ("speaker",
    "microphone") when it is not installed or libportaudio will not load."""
    try:
        return importlib.import_module(backend)
    except ImportError as exc:
        hint = f" (pip install {backend})"
        raise PortAudioError(f"{role} backend {backend} is not installed{hint}: {exc}") from exc
    except OSError as exc:  # libportaudio itself is missing
        raise PortAudioError(f"PortAudio cannot be loaded for {backend}: {exc}") from exc


def quiet_pyaudio(pyaudio: ModuleType) -> Any:
    """``PyAudio()``, without the ALSA and JACK complaints PortAudio's device scan
    prints to stderr (sounddevice hides them the same way)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        return pyaudio.PyAudio()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def has_default_device(module: ModuleType, backend: str, direction: Direction) -> bool:
    """Whether the loaded ``backend`` module has a default ``direction`` device."""
    if backend == "sounddevice":
        try:
            module.query_devices(kind=direction)
        except Exception:  # PortAudioError: no default device
            return False
        return True
    pa = quiet_pyaudio(module)
    try:
        if direction == "input":
            pa.get_default_input_device_info()
        else:
            pa.get_default_output_device_info()
    except OSError:
        return False
    finally:
        pa.terminate()
    return True


def formats_to_try(sample_rate: int, device_rate: int) -> list[tuple[int, int]]:
    """(rate, channels) in the order to try: the rate asked for, then the
    device's own; mono, then two channels."""
    rates = [sample_rate] if device_rate == sample_rate else [sample_rate, device_rate]
    return [(rate, channels) for channels in (1, 2) for rate in rates]


def first_that_opens(formats: list[tuple[int, int]], attempt: Callable[[int, int], T]) -> T:
    """The stream from the first (rate, channels) the device accepts, or
    ``PortAudioError`` with the first refusal (on one line)."""
    errors: list[str] = []
    for rate, channels in formats:
        try:
            return attempt(rate, channels)
        except Exception as exc:  # PortAudioError (a bare Exception), OSError, ValueError
            errors.append(" ".join(str(exc).split()))
    raise PortAudioError(errors[0])


def pyaudio_device(pa: Any, device: str | int | None, direction: Direction) -> int:
    """The index of the default device, of ``device`` (an index with channels that
    way), or of the first whose name contains it; ValueError when none."""
    channels = "maxInputChannels" if direction == "input" else "maxOutputChannels"
    if device is None:
        default = (
            pa.get_default_input_device_info
            if direction == "input"
            else (pa.get_default_output_device_info)
        )
        return int(default()["index"])
    if isinstance(device, int):
        if pa.get_device_info_by_index(device)[channels] <= 0:
            raise ValueError(f"device {device} has no {direction} channels")
        return device
    for index in range(pa.get_device_count()):
        info = pa.get_device_info_by_index(index)
        if info[channels] > 0 and device.lower() in str(info["name"]).lower():
            return index
    raise ValueError(f"no {direction} device named like {device!r}")

"""The detector a ``[vad]`` section names."""

from __future__ import annotations

from .front import VadFront
from .settings import VadSettings
from .silero import SileroVad, VadError
from .webrtc import WebRtcVad


def make_vad(settings: VadSettings, sample_rate: int) -> VadFront:
    """A new detector for one session (Silero's model is loaded once per
    process and shared); ``VadError`` in one line when it cannot be built."""
    try:
        if settings.engine == "webrtc":
            return WebRtcVad(settings, sample_rate)
        return SileroVad(settings, sample_rate)
    except ImportError as exc:
        raise VadError(f"VAD engine {settings.engine!r} is not installed: {exc}") from exc
    except ValueError as exc:
        raise VadError(str(exc)) from exc


__all__ = ["VadError", "make_vad"]

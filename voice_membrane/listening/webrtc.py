"""WebRTC's VAD (``webrtcvad`` from webrtcvad-wheels) behind the shared front:
the fallback engine when Silero is not installed. Its verdicts are 0 or 1 per
10/20/30 ms frame; the state machine smooths them as it smooths Silero's."""

from __future__ import annotations

from typing import Any

from ..vocab.audio import Samples
from .front import VadFront
from .settings import VadSettings

_RATES = (8000, 16_000, 32_000, 48_000)


class WebRtcVad(VadFront):
    """Runs at the input rate when webrtcvad takes it (8/16/32/48 kHz), else
    at 16 kHz (resampled)."""

    def __init__(self, settings: VadSettings | None = None, sample_rate: int = 16_000) -> None:
        settings = settings or VadSettings(engine="webrtc")
        import webrtcvad  # type: ignore[import-untyped]

        self._vad: Any = webrtcvad.Vad(settings.webrtc_aggressiveness)
        model_rate = sample_rate if sample_rate in _RATES else 16_000
        window = model_rate * settings.webrtc_frame_ms // 1000
        super().__init__(settings, sample_rate, model_rate, window)

    def _reset_model(self) -> None:
        pass  # webrtcvad keeps no state between frames that matters here

    def _score(self, window: Samples) -> float:
        return 1.0 if self._vad.is_speech(window.tobytes(), self.model_rate) else 0.0

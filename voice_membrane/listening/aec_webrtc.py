"""WebRTC's audio processing module (AEC3, the canceller in Chrome and
LiveKit) as an ``EchoEngine``, through the ``livekit`` wheel's
``AudioProcessingModule`` (Apache-2.0; the `local` and `cloud` extras install
it). Chosen by measurement over ``aec-audio-processing`` (the same module, an
sdist that compiles for ~9 minutes) and ``speexdsp`` (a plain adaptive filter:
12-26 dB where AEC3 takes 38-66 dB out): docs/listening.md, "Echo cancellation".

Echo cancellation only: its noise suppressor, gain control and high-pass
filter are off (the detector is tuned on unprocessed audio)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..vocab.audio import Samples
from .echo_canceller import EchoCanceller

# The gain the reference is given (1: as played). AEC3's suppressor, until it
# has measured the echo path (and for good where no echo comes back:
# headphones), assumes an echo as loud as the reference and ducks whatever is
# under it: the user's words over the reply. A quieter reference keeps more of
# them (whisper, 10 questions over a -20 / -10 dB echo: 6 / 5 as played, 8 / 6
# at -10 dB; 9 / 8 uncancelled) but on real devices, whose timing jitters, the
# echo leaked through at -10 dB (the PulseAudio loopback test, under load,
# paused itself in 3 runs of 8; 0 of 8 as played): no self-interruption comes
# first (docs/listening.md).
FAR_GAIN = 1.0


class WebRtcEcho:
    def __init__(self, rate: int) -> None:
        try:
            from livekit import rtc
        except ImportError as exc:
            raise ImportError(
                f"the echo canceller needs the livekit package (pip install livekit): {exc}"
            ) from None
        self._rtc: Any = rtc
        self._apm: Any = rtc.AudioProcessingModule(echo_cancellation=True)
        self.rate, self.block = rate, rate // 100

    def process(self, far: Samples, near: Samples) -> Samples:
        rtc = self._rtc
        reference = np.round(far * FAR_GAIN).astype(np.int16)
        self._apm.process_reverse_stream(
            rtc.AudioFrame(bytearray(reference.tobytes()), self.rate, 1, self.block)
        )
        frame = rtc.AudioFrame(bytearray(near.tobytes()), self.rate, 1, self.block)
        self._apm.process_stream(frame)
        return np.frombuffer(bytes(frame.data), dtype=np.int16).copy()


def webrtc_canceller(rate: int) -> EchoCanceller:
    """A canceller at ``rate`` (8, 16, 32 or 48 kHz) over WebRTC's module;
    ``ImportError`` naming the package when it is not installed."""
    return EchoCanceller(rate, WebRtcEcho(rate))

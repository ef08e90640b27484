"""An audio output device the test plays by hand, for SpeakerSink without a sound card.

``device.open_stream`` replaces ``voice_membrane.sinks.speaker.open_stream``;
each ``device.pull()`` is one callback of the device (one 10 ms block, reported
as heard at once), run in the test's own thread, so the test knows exactly when
the device took each sample.
"""

from __future__ import annotations

import numpy as np

from voice_membrane.sinks._portaudio import Fill, Stream
from voice_membrane.vocab.audio import Samples


class ManualDevice:
    def __init__(self) -> None:
        self._fill: Fill | None = None
        self._block = 0
        self.active = False

    def open_stream(
        self,
        backend: str,
        device: str | int | None,
        sample_rate: int,
        block_seconds: float,
        fill: Fill,
    ) -> Stream:
        self._fill = fill
        self._block = max(1, round(sample_rate * block_seconds))
        return Stream(sample_rate, 1, 0.0, self._start, lambda: self.active, self._close)

    def pull(self) -> Samples:
        """One callback: the block the device takes from the sink's buffer."""
        assert self._fill is not None and self.active, "the stream is not started"
        out = np.zeros(self._block, dtype=np.int16)
        self._fill(out, 0.0)
        return out

    def _start(self) -> None:
        self.active = True

    def _close(self) -> None:
        self.active = False

"""Push to talk: the user says where their speech is, with a button.

Sans-I/O, in the shape of a detector (``feed`` samples, get ``SpeechStart`` /
``SpeechEnd``), so the listener, the STT and the endpointer work unchanged.
The press and the release are placed at sample positions of the input
(``press(at)`` / ``release(at)``: what had been received when the message
came), so they fall where the user pressed however the frames are chunked or
how late they are fed. Audio outside a press is fed too (time goes on) but
is nobody's speech.
"""

from __future__ import annotations

import numpy as np

from ..vocab.audio import Samples
from .vad import SpeechEnd, SpeechStart, VadEvent

_EMPTY: Samples = np.zeros(0, dtype=np.int16)


class PushToTalk:
    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._fed = 0
        self._marks: list[tuple[int, bool]] = []  # (position, pressed) not yet reached
        self._pressed = False  # as of the last mark given (not as of the audio fed)
        self._speaking = False  # as of the audio fed

    @property
    def samples_fed(self) -> int:
        return self._fed

    @property
    def speaking(self) -> bool:
        return self._speaking

    @property
    def pausing(self) -> bool:
        return False  # the release is the end at once: no unconfirmed stop

    def press(self, at_sample: int) -> bool:
        """The button went down at ``at_sample``; False if it was down already."""
        if self._pressed:
            return False
        self._pressed = True
        self._marks.append((max(at_sample, self._last_mark()), True))
        return True

    def release(self, at_sample: int) -> bool:
        """The button came up at ``at_sample``; False if it was not down."""
        if not self._pressed:
            return False
        self._pressed = False
        self._marks.append((max(at_sample, self._last_mark()), False))
        return True

    def _last_mark(self) -> int:
        return self._marks[-1][0] if self._marks else self._fed

    def feed(self, samples: Samples) -> list[VadEvent]:
        end = self._fed + len(samples)
        events: list[VadEvent] = []
        while self._marks and self._marks[0][0] <= end:
            at, pressed = self._marks.pop(0)
            events.append(self._event(max(at, self._fed), pressed))
        self._fed = end
        return events

    def flush(self) -> list[VadEvent]:
        """The input ended: a press still held ends here."""
        events = [self._event(self._fed, pressed) for _, pressed in self._marks]
        self._marks.clear()
        if self._speaking:
            events.append(self._event(self._fed, False))
        return events

    def _event(self, at: int, pressed: bool) -> VadEvent:
        self._speaking = pressed
        if pressed:
            return SpeechStart(at, at, at, _EMPTY)
        return SpeechEnd(at, at)

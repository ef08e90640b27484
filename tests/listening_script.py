"""Scripted listening sessions for the endpointer tests: VAD events, windows,
transcripts and the assistant's playout placed on one timeline of input
samples, fed in order, with the clock advanced between them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from voice_membrane.listening.decisions import Decision
from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.settings import EndpointSettings
from voice_membrane.listening.vad import SpeechEnd, SpeechStart, VadWindow
from voice_membrane.vocab.transcripts import Transcript

RATE = 16_000
WINDOW = 512
CONFIRM_S = 0.2  # the detector's min speech and min silence


def at(t: float) -> int:
    return round(t * RATE)


Step = Callable[[Endpointer], list[Decision]]


@dataclass
class Script:
    steps: list[tuple[int, int, Step]] = field(default_factory=list)

    def add(self, t: float, step: Step) -> Script:
        self.steps.append((at(t), len(self.steps), step))
        return self

    def speech(
        self, start: float, end: float, level: float = -20.0, windows: bool = True
    ) -> Script:
        """The user (or anything the VAD takes for speech) from start to end:
        windows at ``level`` dBFS, the confirmed start and end."""
        if windows:
            self.windows(start, end, level)
        empty = np.zeros(0, dtype=np.int16)
        s = SpeechStart(at(start), at(start + CONFIRM_S), max(0, at(start - 0.5)), empty)
        e = SpeechEnd(at(end), at(end + CONFIRM_S))
        self.add(start + CONFIRM_S, lambda ep: ep.vad(s))
        return self.add(end + CONFIRM_S, lambda ep: ep.vad(e))

    def windows(self, start: float, end: float, level: float = -20.0) -> Script:
        """Speech windows alone: what the detector heard without (yet)
        confirming a start."""
        for w0 in range(at(start) // WINDOW * WINDOW, at(end), WINDOW):
            window = VadWindow(w0, WINDOW, 0.95, level, True)
            self.add((w0 + WINDOW) / RATE, lambda ep, w=window: ep.vad(w))
        return self

    def heard(
        self,
        t: float,
        text: str,
        final: bool = True,
        settles: bool = True,
        start: int | None = None,
    ) -> Script:
        tr = Transcript(text, final)
        return self.add(t, lambda ep: ep.transcript(tr, at(t), start=start, settles=settles))

    def judged(self, end: float, probability: float | None, after_s: float = 0.0) -> Script:
        """The end-of-turn model's answer for the speech that stopped at ``end``,
        ``after_s`` after the detector confirmed the stop (when it was asked)."""
        t = end + CONFIRM_S + after_s
        return self.add(t, lambda ep: ep.turn_judged(probability, at(t), speech_end=at(end)))

    def done(self, t: float) -> Script:
        return self.add(t, lambda ep: ep.transcripts_done(at(t)))

    def assistant(self, t: float, speaking: bool) -> Script:
        return self.add(t, lambda ep: ep.assistant_speaking(speaking, at(t)))

    def run(
        self, until: float, settings: EndpointSettings | None = None, tick_s: float = 0.01
    ) -> list[Decision]:
        ep = Endpointer(settings, RATE)
        out: list[Decision] = []
        ticks = [(t, -1, None) for t in range(0, at(until), at(tick_s) or 1)]
        timeline = sorted([*self.steps, *ticks], key=lambda s: (s[0], s[1]))
        for t, _, step in timeline:
            out.extend(ep.advance(t) if step is None else step(ep))
        return out + ep.advance(at(until))

    def run_on_deadlines(
        self, until: float, settings: EndpointSettings | None = None
    ) -> list[tuple[int, Decision]]:
        """The script with no clock ticks: between inputs the endpointer is
        advanced only to its ``next_deadline()``, as a listener's timer does.
        Each decision comes with the sample it was made at."""
        ep = Endpointer(settings, RATE)
        out: list[tuple[int, Decision]] = []
        for t, _, step in sorted([*self.steps, (at(until), 1 << 30, None)]):
            while (deadline := ep.next_deadline()) is not None and deadline <= t:
                out += [(deadline, d) for d in ep.advance(deadline)]
            out += [(t, d) for d in (ep.advance(t) if step is None else step(ep))]
        return out

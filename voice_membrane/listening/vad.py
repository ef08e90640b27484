"""The voice activity state machine: per-window speech probabilities in,
``SpeechStart`` / ``SpeechEnd`` out, counted in samples (never the clock).

Four states, as Pipecat's analyser has, with LiveKit's hysteresis:

- quiet → starting: the smoothed probability reaches ``activate``;
- starting → speaking: it stays at or above ``deactivate`` for ``min_speech_s``
  (``SpeechStart`` dated where the run began); falling below first: quiet again,
  no event (a cough or a click);
- speaking → stopping: it falls below ``deactivate``;
- stopping → quiet: it stays below ``activate`` for ``min_silence_s``
  (``SpeechEnd`` dated where the silence began); reaching ``activate`` first:
  speaking again, no event.

A window quieter than the loudness gate counts as probability 0 whatever the
model says: ``min_level_dbfs`` (silence, a fan), raised by ``gate =
"adaptive"`` to ``gate_margin_db`` above the room's background speech (a TV;
background.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from ..vocab.audio import Samples
from .background import BackgroundLevel
from .settings import VadSettings

SILENT_DBFS = -120.0
_BACKDATE_S = 0.25  # how far before the gated run an event may be dated


@dataclass(frozen=True, slots=True)
class VadWindow:
    """One window's verdict: where it starts, its length, the model's
    probability (0 when the loudness gate shut it), its level, and whether the
    detector considers the user speaking after it (confirmed speech, including
    a stop not yet confirmed)."""

    at_sample: int
    samples: int
    probability: float
    level_dbfs: float
    speaking: bool


@dataclass(frozen=True, slots=True)
class SpeechStart:
    """Speech began at ``at_sample`` and was confirmed at ``confirmed_at``.

    ``audio`` is the input from ``audio_from`` (``preroll_s`` before the start,
    or the stream's start) up to ``confirmed_at``: what an STT stream opened now
    must be given first; the caller then pushes input from ``confirmed_at`` on
    (``samples_after``)."""

    at_sample: int
    confirmed_at: int
    audio_from: int
    audio: Samples = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class SpeechEnd:
    """Speech stopped at ``at_sample`` (the silence began there), confirmed at
    ``confirmed_at`` (after ``min_silence_s`` of it, or at the end of input)."""

    at_sample: int
    confirmed_at: int


@dataclass(frozen=True, slots=True)
class LevelRise:
    """The input's level rose well above its running floor and the start gate
    (level.py) from ``at_sample``, and had stayed up at ``confirmed_at``: maybe
    the user beginning to speak, before the model can tell (a cough too).
    ``level_dbfs``: its quietest block."""

    at_sample: int
    confirmed_at: int
    level_dbfs: float


VadEvent = VadWindow | SpeechStart | SpeechEnd | LevelRise
SoundBlocks = Callable[[int], list[tuple[int, int, float]]]


def samples_after(chunk: Samples, chunk_end: int, at_sample: int) -> Samples:
    """The part of ``chunk`` (whose last sample is ``chunk_end - 1``) from
    ``at_sample`` on: what follows a ``SpeechStart``'s audio in the chunk that
    confirmed it."""
    start = len(chunk) - (chunk_end - at_sample)
    return chunk[max(0, start) :]


def level_dbfs(window: Samples) -> float:
    """RMS level of int16 samples in dBFS (``SILENT_DBFS`` for digital silence)."""
    if len(window) == 0:
        return SILENT_DBFS
    x = window.astype(np.float64)
    power = float(np.dot(x, x))  # (exact: integers under 2**53)
    return 10.0 * math.log10(power / len(x)) - _FULL_SCALE_DB if power > 0 else SILENT_DBFS


def block_levels(samples: Samples, size: int) -> list[float]:
    """``level_dbfs`` of each ``size`` block of ``samples`` (a whole number of
    them), in one pass."""
    if len(samples) == 0:
        return []
    # each row's power, exactly (integers: the same whatever the rows), then
    # a few blocks' logs in Python: cheaper than more numpy calls
    x = samples.astype(np.int64).reshape(-1, size)
    powers: list[int] = np.einsum("ij,ij->i", x, x).tolist()
    log10, full_scale = math.log10, _FULL_SCALE_DB
    return [10.0 * log10(p / size) - full_scale if p > 0 else SILENT_DBFS for p in powers]


_FULL_SCALE_DB = 20.0 * math.log10(32768.0)


class _State(Enum):
    QUIET = 0
    STARTING = 1
    SPEAKING = 2
    STOPPING = 3


class VadStateMachine:
    """Sans-I/O: ``window(probability, level)`` per window of ``window_samples``
    (contiguous, from sample 0), ``flush()`` at the end of input. Events carry
    sample positions at ``sample_rate``; ``SpeechStart.audio`` is left empty
    here (the front that holds the audio fills it)."""

    def __init__(self, settings: VadSettings, sample_rate: int, window_samples: int) -> None:
        self.settings = settings
        self.sample_rate = sample_rate
        self.window_samples = window_samples
        self._min_speech = round(settings.min_speech_s * sample_rate)
        self._min_silence = round(settings.min_silence_s * sample_rate)
        self._backdate = round(_BACKDATE_S * sample_rate)
        self._gate = (
            BackgroundLevel(
                settings.min_level_dbfs,
                settings.gate_margin_db,
                window_samples / sample_rate,
                ongoing_is_background=settings.already_talking != "user",
            )
            if settings.gate == "adaptive"
            else None
        )
        self.reset()

    def reset(self) -> None:
        """A new session: quiet, sample 0, no smoothing history."""
        self._state = _State.QUIET
        self._position = 0
        self._smoothed = 0.0
        self._mark = 0  # where the current run (speech or silence) began
        self._run = 0  # samples in it
        # where the probability last crossed ``deactivate`` (up, down), gated
        # and not: the smoothed one crosses later, so runs count from the gated
        # crossing, and starts are dated by the ungated one (a soft first sound
        # under the level gate is still part of the word), at most _BACKDATE_S
        # back. Ends are not: the model's probability lags the sound's end.
        self._above_since = self._below_since = 0
        self._raw_above_since = self._raw_below_since = 0
        if self._gate is not None:
            self._gate.reset()

    @property
    def speaking(self) -> bool:
        return self._state in (_State.SPEAKING, _State.STOPPING)

    @property
    def pausing(self) -> bool:
        """Speech stopped and the stop is not confirmed yet (``min_silence_s``):
        the user may be done, or pausing mid-sentence."""
        return self._state is _State.STOPPING

    @property
    def start_gate(self) -> float:
        """The level a window must reach now to start speech."""
        return self.settings.min_level_dbfs if self._gate is None else self._gate.gate().start

    @property
    def position(self) -> int:
        """Where the next window starts (samples at the model's rate)."""
        return self._position

    def window(
        self, probability: float, level: float, sound: SoundBlocks | None = None
    ) -> list[VadEvent]:
        """One window's verdict; ``sound(start)``, when given, tells the levels
        of short blocks of the input from ``start`` on, to date a stop by."""
        s = self.settings
        raw = probability if math.isfinite(probability) else 0.0
        threshold, soft = s.min_level_dbfs, raw
        if self._gate is not None:
            background = self._gate.background
            gate = self._gate.window(raw >= s.deactivate, level, self.speaking)
            threshold = gate.go_on if self.speaking else gate.start
            if background is not None and level < background + s.gate_margin_db / 2:
                soft = 0.0  # the background's own speech does not date a start
        p = raw if level >= threshold else 0.0
        a = s.smoothing
        self._smoothed = a * p + (1.0 - a) * self._smoothed
        at, n = self._position, self.window_samples
        self._position += n
        if p >= s.deactivate:
            self._below_since = self._position
        else:
            self._above_since = self._position
        if soft >= s.deactivate:
            self._raw_below_since = self._position
        else:
            self._raw_above_since = self._position
        events: list[VadEvent] = []
        smoothed = self._smoothed
        if self._state is _State.QUIET and smoothed >= s.activate:
            self._enter(_State.STARTING, min(at, self._above_since), self._raw_above_since, at)
        elif self._state is _State.SPEAKING and smoothed < s.deactivate:
            self._enter(_State.STOPPING, min(at, self._below_since), self._raw_below_since, at)
            if sound is not None:
                self._date_stop(sound(max(0, min(at, self._below_since) - n)), threshold)
        if self._state is _State.STARTING:
            if smoothed < s.deactivate:
                self._state = _State.QUIET  # too short: a cough, a click
            else:
                self._run += n
                if self._run >= self._min_speech:
                    self._state = _State.SPEAKING
                    empty = np.zeros(0, dtype=np.int16)
                    events.append(SpeechStart(self._mark, self._position, self._mark, empty))
        elif self._state is _State.STOPPING:
            if smoothed >= s.activate:
                self._state = _State.SPEAKING  # a pause, not the end
            else:
                self._run += n
                if self._run >= self._min_silence:
                    self._state = _State.QUIET
                    events.append(SpeechEnd(self._mark, self._position))
        events.insert(0, VadWindow(at, n, p, level, self.speaking))
        return events

    def _enter(self, state: _State, run_from: int, raw_from: int, at: int) -> None:
        self._state = state
        self._run = at - run_from  # the run before this window counts
        self._mark = max(min(run_from, raw_from), run_from - self._backdate)

    def _date_stop(self, blocks: list[tuple[int, int, float]], threshold: float) -> None:
        """Date the stop just entered by the sound rather than by the window:
        ``blocks`` are (start, samples, level) of a few ms each, from the last
        speech window on; the silence began after the last one the gate lets
        through. (The model's probability falls a window after the sound, in
        steps of a window: up to 32 ms of silence, or of the fading last
        syllable, misdated.)"""
        loud = [start + n for start, n, level in blocks if level >= threshold]
        if loud:
            self._mark = loud[-1]

    def flush(self) -> list[VadEvent]:
        """The end of input: speech still going ends where its silence began,
        or here."""
        events: list[VadEvent] = []
        if self._state is _State.SPEAKING:
            events.append(SpeechEnd(self._position, self._position))
        elif self._state is _State.STOPPING:
            events.append(SpeechEnd(self._mark, self._position))
        self._state = _State.QUIET
        return events

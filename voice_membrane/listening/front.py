"""What every detector engine shares: any chunking in, whole windows to the
model, the state machine, and the pre-roll ring that a ``SpeechStart`` hands
the STT.

Positions in events are samples of the *input* (at the rate the caller feeds),
whatever rate the model runs at, so the caller can cut its own audio by them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..vocab.audio import Samples
from .level import LevelRiseWatch
from .resample import StreamResampler
from .settings import VadSettings
from .vad import (
    LevelRise,
    SpeechEnd,
    SpeechStart,
    VadEvent,
    VadStateMachine,
    VadWindow,
    block_levels,
    level_dbfs,
)

_RECENT_WINDOWS = 8  # kept to date a stop by its sound: the smoothing's lag and more
LEVEL_BLOCK_S = 0.004  # the level blocks: the precision a stop is dated to
_NO_SAMPLES: Samples = np.zeros(0, dtype=np.int16)
# Deep silence: windows this far under the loudness gate's floor, after this
# many in a row. The gate gives them probability 0 whatever the model says, so a
# model that ``skips_deep_silence`` is not run on them (its state held).
_DEEP_SILENCE_DB = 10.0
_DEEP_SILENCE_RUN = 8


def level_block(rate: int) -> int:
    """Samples in one of the detector's level blocks at ``rate``."""
    return max(1, round(LEVEL_BLOCK_S * rate))


@dataclass(slots=True)
class _Staged:
    """What ``stage`` took in, for its ``judge``."""

    buf: Samples  # model-rate samples: the whole windows, then the rest
    blocks: Samples  # model-rate samples for the level blocks
    levels: list[float]  # each whole window's level, dBFS
    skipped: list[bool]  # each whole window: deep silence, not scored


class SpeechFront(Protocol):
    """What the listener needs of whatever says where speech is: a detector
    (``VadFront``) or a push-to-talk button (``PushToTalk``)."""

    sample_rate: int

    @property
    def samples_fed(self) -> int: ...

    @property
    def speaking(self) -> bool:
        """Speech started and its end is not confirmed (``pausing`` included)."""
        ...

    @property
    def pausing(self) -> bool:
        """The user stopped speaking and the stop is not confirmed yet."""
        ...

    def feed(self, samples: Samples) -> list[VadEvent]: ...

    def flush(self) -> list[VadEvent]: ...


class VadFront(ABC):
    """``feed(samples) -> events``, ``flush() -> events`` at the end of input,
    ``reset()`` between sessions (never on a timer)."""

    # A model whose cost is worth saving: not run in deep silence (listening.md)
    skips_deep_silence = False

    def __init__(
        self, settings: VadSettings, sample_rate: int, model_rate: int, window: int
    ) -> None:
        if sample_rate < 8000 or sample_rate > 192_000:
            raise ValueError(f"VAD input rate {sample_rate} Hz is outside 8000-192000")
        self.settings = settings
        self.sample_rate = sample_rate
        self.model_rate = model_rate
        self.window = window
        self._machine = VadStateMachine(settings, model_rate, window)
        self._resampler = StreamResampler(sample_rate, model_rate)
        self._block = level_block(model_rate)
        self._rise = LevelRiseWatch(settings.rise_db, settings.rise_s, self._block, model_rate)
        # Off when nothing uses the rises (the level pause off): the blocks' levels
        # cost about a fifth of the detector's CPU.
        self.watch_rises = True
        # the pre-roll, the confirmation run and a window of slack, at the input rate
        span = settings.preroll_s + settings.min_speech_s + 2 * window / model_rate
        self._capacity = int(span * sample_rate) + 1
        self.reset()

    def reset(self) -> None:
        """A new session: the model's state, the machine and the counts start over."""
        self._machine.reset()
        self._resampler.reset()
        self._pending = np.zeros(0, dtype=np.int16)  # model-rate samples short of a window
        self._rise.reset()
        self._block_pending = np.zeros(0, dtype=np.int16)  # model-rate samples short of a block
        self._block_at = 0  # where the pending block starts (model rate)
        self._recent: deque[tuple[int, Samples]] = deque(maxlen=_RECENT_WINDOWS)
        # the last input, for the pre-roll: frames' copies (joined only when
        # speech starts), at least the ``_capacity`` samples before this feed's
        self._history: deque[Samples] = deque()
        self._history_len = 0
        self._history_from = 0  # the first sample held for the pre-roll
        self._fed = 0
        self._staged: _Staged | None = None
        self._deep_run = 0  # windows of deep silence in a row, up to the last staged
        self._reset_model()

    @property
    def speaking(self) -> bool:
        return self._machine.speaking

    @property
    def pausing(self) -> bool:
        return self._machine.pausing

    @property
    def samples_fed(self) -> int:
        return self._fed

    def feed(self, samples: Samples) -> list[VadEvent]:
        """Mono int16 at ``sample_rate``; events for every window it completes."""
        return self.judge(self.score(self.stage(samples)))

    # feed() in three steps, for a caller that scores many detectors' windows
    # in one model call (pipeline/vad_batch.py): stage, score, judge — each
    # stage followed by its judge before the next stage.

    def stage(self, samples: Samples) -> list[Samples]:
        """Take ``samples`` in; the whole windows (model rate) it completes, in
        order, for ``score`` — less those of deep silence, which ``judge``
        counts as probability 0."""
        if samples.ndim != 1:
            raise ValueError(f"VAD input must be mono (1-D), got shape {samples.shape}")
        if samples.dtype != np.int16:  # a float array cast would be silence
            raise ValueError(f"VAD input must be int16 PCM, got {samples.dtype}")
        if self._staged is not None:
            raise RuntimeError("VadFront.stage() twice without a judge() between")
        self._fed += len(samples)
        self._history.append(samples.copy())  # (the caller may reuse its buffer)
        self._history_len += len(samples)
        model = self._resampler.feed(samples)
        buf = np.concatenate([self._pending, model]) if len(self._pending) else model
        if not self.watch_rises:
            blocks = _NO_SAMPLES
        elif len(self._block_pending):
            blocks = np.concatenate([self._block_pending, model])
        else:
            blocks = model
        window = self.window
        windows = [buf[i * window : (i + 1) * window] for i in range(len(buf) // window)]
        levels = [level_dbfs(w) for w in windows]
        skipped = self._deep_silence(levels)
        self._staged = _Staged(buf, blocks, levels, skipped)
        return [w for w, skip in zip(windows, skipped, strict=True) if not skip]

    def _deep_silence(self, levels: list[float]) -> list[bool]:
        """Which windows the model is spared: past a run of deep silence (a
        function of the audio alone, so any chunking decides alike)."""
        if not self.skips_deep_silence:
            return [False] * len(levels)
        floor = self.settings.min_level_dbfs - _DEEP_SILENCE_DB
        skipped = []
        for level in levels:
            self._deep_run = self._deep_run + 1 if level < floor else 0
            skipped.append(self._deep_run > _DEEP_SILENCE_RUN)
        return skipped

    def score(self, windows: list[Samples]) -> list[float]:
        """The speech probabilities of consecutive ``windows``, in order (the
        model's state goes on from one to the next)."""
        return [self._score(w) for w in windows]

    def judge(self, scores: list[float]) -> list[VadEvent]:
        """The events of the staged windows, given the ``scores`` of those
        ``stage`` returned."""
        staged = self._staged
        if staged is None:
            raise RuntimeError("VadFront.judge() without a stage() before it")
        buf, blocks, window_levels = staged.buf, staged.blocks, staged.levels
        self._staged = None
        wanted = staged.skipped.count(False)
        if len(scores) != wanted:
            raise ValueError(f"{len(scores)} scores for {wanted} staged windows")
        given = iter(scores)
        probabilities = [0.0 if skip else next(given) for skip in staged.skipped]
        machine, window, size = self._machine, self.window, self._block
        n, nb = len(window_levels), len(blocks) // size
        window_end = machine.position + window  # (model rate, as the block ends)
        block_at = self._block_at
        block_dbfs = block_levels(blocks[: nb * size], size)  # (one numpy call per feed)
        gate = machine.start_gate  # changes only with a window
        events: list[VadEvent] = []
        rise, recent, sound = self._rise, self._recent, self._blocks_from
        j = 0
        # windows and level blocks in the order of their ends (a block first on
        # a tie): each block is judged by the gate of the windows before it,
        # whatever the chunking
        for i in range(n + 1):
            # the blocks that end by this window's end (all that are left after the last)
            upto = nb if i == n else min(nb, (window_end + i * window - block_at) // size)
            if upto > j:
                events += rise.blocks(block_at + j * size, size, block_dbfs[j:upto], gate)
                j = upto
            if i == n:
                break
            w = buf[i * window : (i + 1) * window]
            recent.append((machine.position, w.copy()))  # (a copy: the caller may reuse its buffer)
            events += machine.window(probabilities[i], window_levels[i], sound)
            gate = machine.start_gate
        self._pending = buf[n * window :].copy()
        self._block_pending = blocks[nb * size :].copy()
        self._block_at = block_at + nb * size
        out = [self._to_input(e) for e in events]
        self._forget_history()
        return out

    def _forget_history(self) -> None:
        """Keep the last ``_capacity`` samples for the pre-roll (whole frames:
        what a start may take is bounded by ``_history_from``)."""
        history, capacity = self._history, self._capacity
        while history and self._history_len - len(history[0]) >= capacity:
            self._history_len -= len(history.popleft())
        self._history_from = max(0, self._fed - capacity)

    def _blocks_from(self, start: int) -> list[tuple[int, int, float]]:
        """(start, samples, level) of ``LEVEL_BLOCK_S`` blocks of the recent windows
        (model rate) from ``start`` on."""
        size = self._block
        blocks: list[tuple[int, int, float]] = []
        for at, w in self._recent:
            for offset in range(0, len(w), size):
                piece = w[offset : offset + size]
                if at + offset + len(piece) > start:
                    blocks.append((at + offset, len(piece), level_dbfs(piece)))
        return blocks

    def flush(self) -> list[VadEvent]:
        """End of input: the partial window is scored padded with silence and
        speech still going ends."""
        events: list[VadEvent] = []
        if len(self._pending):
            w = np.zeros(self.window, dtype=np.int16)
            w[: len(self._pending)] = self._pending
            self._pending = np.zeros(0, dtype=np.int16)
            self._recent.append((self._machine.position, w))
            events.extend(self._machine.window(self._score(w), level_dbfs(w), self._blocks_from))
        events.extend(self._machine.flush())
        return [self._to_input(e, clamp=True) for e in events]

    def _at(self, model_sample: int) -> int:
        # just past the input sample the model's sample before it came from:
        # never beyond what was fed when that sample was made (any chunking),
        # except the silence flush() pads with
        if model_sample <= 0:
            return 0
        at = (model_sample - 1) * self.sample_rate // self.model_rate + 1
        return min(self._fed, at)

    def _to_input(self, event: VadEvent, clamp: bool = False) -> VadEvent:
        if self.sample_rate == self.model_rate and not clamp:
            if isinstance(event, SpeechStart):
                return self._with_audio(event.at_sample, event.confirmed_at)
            return event
        if isinstance(event, VadWindow):
            start, end = self._at(event.at_sample), self._at(event.at_sample + event.samples)
            return VadWindow(
                start, end - start, event.probability, event.level_dbfs, event.speaking
            )
        if isinstance(event, SpeechStart):
            return self._with_audio(self._at(event.at_sample), self._at(event.confirmed_at))
        if isinstance(event, LevelRise):
            return LevelRise(
                self._at(event.at_sample), self._at(event.confirmed_at), event.level_dbfs
            )
        return SpeechEnd(self._at(event.at_sample), self._at(event.confirmed_at))

    def _with_audio(self, at: int, confirmed: int) -> SpeechStart:
        audio_from = max(0, at - round(self.settings.preroll_s * self.sample_rate))
        held_from = self._fed - self._history_len
        # bounded: never more than the last _capacity samples before this feed
        audio_from = max(audio_from, held_from, self._history_from)
        history = np.concatenate(self._history) if self._history else _NO_SAMPLES
        audio = history[audio_from - held_from : confirmed - held_from].copy()
        return SpeechStart(at, confirmed, audio_from, audio)

    @abstractmethod
    def _score(self, window: Samples) -> float:
        """The speech probability of one window at ``model_rate``."""

    @abstractmethod
    def _reset_model(self) -> None:
        """Forget the model's recurrent state."""

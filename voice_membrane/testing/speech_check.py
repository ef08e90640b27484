"""Does this audio plausibly hold speech of this text? A judge for offline tests.

``analyze_speech`` measures the audio on 20 ms frames (RMS level in dBFS);
``looks_like_speech`` / ``speech_problems`` compare the measurements with
bounds derived from the text. No model, no network: it cannot tell *what* is
said, only that the audio has the shape of speech (energy that comes and goes
at syllable rate, pauses, a plausible length) rather than silence, noise, a
tone or a truncated piece.

A frame is *active* when its level is within 30 dB of the loudest frame and
clearly above the noise floor (see ``_threshold``).

Calibration (espeak-ng 1.51 at 80/175/300 wpm and Piper en_US-joe-medium, 12
sentences of 1-23 words):

- span (first to last active frame) per spoken character: 49-160 ms at normal
  speed (the highest for one-word texts), 35-90 ms at 300 wpm, up to 380 ms at
  80 wpm. Bounds: 30 ms per character up to 150 ms per character + 0.35 s, so
  normal and fast speech pass and very slow speech fails. Digits count 4
  characters each ("21" is read "twenty one").
- active share of the whole duration: 0.5-0.92 (TTS pads with silence).
  Bounds 0.3-0.95; a steady tone or noise is active throughout.
- bursts (active runs separated by >= 150 ms): 1 per clause or sentence, not per
  word; fluent speech has no such gaps between words. Bound: 1 to words + 1.
- nuclei (the level rises and then falls by >= 6 dB: ~syllables): 0.8-3 per
  word, 1.3-9 per second of span. Bounds: at least one per two words, at most
  12 per second. A tone or noise has one.
- spread of active frame levels (90th minus 10th percentile): 9.5-32 dB.
  Bound >= 6 dB; a tone or noise is flat (< 1 dB).
- zero crossings (median over active frames): 900-2200 per second. Bound
  <= 3500; white noise crosses at about half its sample rate.

For a whole conversation turn with long gaps between pieces, check each piece
or trim the gaps first: the active-share bound assumes one utterance.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..vocab.audio import AudioChunk

FRAME_MS = 20
GAP_MS = 150  # the silence that separates two bursts
SILENT_DBFS = -120.0  # level given to digital silence
ACTIVE_BELOW_PEAK_DB = 30.0
ACTIVE_ABOVE_FLOOR_DB = 6.0
NUCLEUS_SWING_DB = 6.0


@dataclass(frozen=True, slots=True)
class SpeechReport:
    """Measurements of one stretch of audio (levels are 20 ms frame RMS, dBFS)."""

    duration_s: float
    active_share: float  # active frames / all frames
    span_s: float  # first active frame to last
    bursts: int  # active runs separated by >= GAP_MS of inactive frames
    peak_dbfs: float  # the loudest frame
    floor_dbfs: float  # 10th percentile of all frames: the noise floor
    nuclei: int  # level rises then falls by >= NUCLEUS_SWING_DB: ~syllables
    level_spread_db: float  # 90th minus 10th percentile of active frames
    zero_crossings_hz: float  # median over active frames


def analyze_chunks(chunks: Iterable[AudioChunk]) -> SpeechReport:
    """``analyze_speech`` of chunks played one after the other."""
    chunks = list(chunks)
    rates = {chunk.sample_rate for chunk in chunks}
    if len(rates) > 1:
        raise ValueError(f"chunks have different sample rates: {sorted(rates)}")
    rate = rates.pop() if rates else 16000
    samples = np.concatenate([c.samples for c in chunks]) if chunks else np.zeros(0, np.int16)
    return analyze_speech(samples, rate)


def analyze_speech(samples: npt.NDArray[Any], sample_rate: int) -> SpeechReport:
    """Measure mono ``samples`` (int16, or floats in [-1, 1])."""
    signal = np.asarray(samples, dtype=np.float64)
    if np.issubdtype(np.asarray(samples).dtype, np.integer):
        signal = signal / 32768.0
    frame = max(1, sample_rate * FRAME_MS // 1000)
    n_frames = len(signal) // frame
    duration = len(signal) / sample_rate
    if n_frames == 0:
        return SpeechReport(duration, 0.0, 0.0, 0, SILENT_DBFS, SILENT_DBFS, 0, 0.0, 0.0)
    frames = signal[: n_frames * frame].reshape(n_frames, frame)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    levels = np.maximum(20 * np.log10(np.maximum(rms, 1e-12)), SILENT_DBFS)
    peak = float(levels.max())
    floor = float(np.percentile(levels, 10))
    threshold = _threshold(peak, floor)
    active = levels >= threshold
    index = np.flatnonzero(active)
    if len(index) == 0:
        return SpeechReport(duration, 0.0, 0.0, 0, peak, floor, 0, 0.0, 0.0)
    first, last = int(index[0]), int(index[-1])
    gaps = np.diff(index) - 1
    active_levels = levels[active]
    signs = np.signbit(frames[active])
    crossings = np.count_nonzero(signs[:, 1:] != signs[:, :-1], axis=1) / (frame - 1 or 1)
    return SpeechReport(
        duration_s=duration,
        active_share=len(index) / n_frames,
        span_s=(last - first + 1) * frame / sample_rate,
        bursts=1 + int(np.count_nonzero(gaps * FRAME_MS >= GAP_MS)),
        peak_dbfs=peak,
        floor_dbfs=floor,
        nuclei=_count_nuclei(np.maximum(levels[first : last + 1], threshold), threshold),
        level_spread_db=float(np.percentile(active_levels, 90) - np.percentile(active_levels, 10)),
        zero_crossings_hz=float(np.median(crossings)) * sample_rate,
    )


def speech_problems(report: SpeechReport, text: str) -> list[str]:
    """Why ``report`` does not look like ``text`` spoken (empty: it does)."""
    letters = sum(c.isalpha() for c in text)
    digits = sum(c.isdigit() for c in text)
    spoken = max(1, letters + 4 * digits)  # a digit is read as a word
    words = max(1, len(text.split()))
    problems: list[str] = []
    if report.peak_dbfs < -45:
        return [f"silent: loudest frame {report.peak_dbfs:.1f} dBFS"]
    low, high = 0.03 * spoken, 0.15 * spoken + 0.35
    if not low <= report.span_s <= high:
        problems.append(
            f"span {report.span_s:.2f} s outside {low:.2f}-{high:.2f} s for {spoken} characters"
        )
    if not 0.3 <= report.active_share <= 0.95:
        problems.append(f"active share {report.active_share:.2f} outside 0.30-0.95")
    if not 1 <= report.bursts <= words + 1:
        problems.append(f"{report.bursts} bursts for {words} words")
    if report.nuclei < math.ceil(words / 2):
        problems.append(f"{report.nuclei} energy peaks for {words} words (want one per 2)")
    if report.span_s > 0 and report.nuclei / report.span_s > 12:
        problems.append(f"{report.nuclei / report.span_s:.1f} energy peaks per second (> 12)")
    if report.level_spread_db < 6:
        problems.append(f"flat level: spread {report.level_spread_db:.1f} dB (< 6)")
    if report.zero_crossings_hz > 3500:
        problems.append(f"noise-like: {report.zero_crossings_hz:.0f} zero crossings/s (> 3500)")
    return problems


def looks_like_speech(report: SpeechReport, text: str) -> bool:
    """True when ``report`` is plausibly ``text`` spoken at a normal pace."""
    return not speech_problems(report, text)


def _threshold(peak: float, floor: float) -> float:
    """Level from which a frame is active: 30 dB below the peak, but at least
    6 dB above the noise floor (capped at 10 dB below the peak, so a steady
    loud signal still counts as active), never below -90 dBFS."""
    above_floor = min(floor + ACTIVE_ABOVE_FLOOR_DB, peak - 10.0)
    return max(peak - ACTIVE_BELOW_PEAK_DB, above_floor, -90.0)


def _count_nuclei(levels: npt.NDArray[np.float64], base: float) -> int:
    """Peaks of ``levels`` that rise and then fall by at least NUCLEUS_SWING_DB
    (hysteresis, starting from ``base`` so a loud first frame counts)."""
    count = 0
    rising = True
    low = high = base
    for value in levels.tolist():
        if rising:
            low = min(low, value)
            if value - low >= NUCLEUS_SWING_DB:
                count += 1
                rising = False
                high = value
        else:
            high = max(high, value)
            if high - value >= NUCLEUS_SWING_DB:
                rising = True
                low = value
    return count

"""A conversation written down as it was heard (``[recording]``): a stereo WAV
— the user's voice left, the assistant's right — and its transcript beside it
(JSON lines), named for the time it began and the session.

The user's frames are placed by their stream's own count (resynchronised by
their arrival after a gap); the assistant's utterances come from the sink
(``sinks/recorded.py``) when they end, each placed where it began to play,
held silent over its pauses, and cut where the listener stopped hearing it
(an interruption). What is older than any utterance still playing, and a
second behind the user's latest frame, is written out; the rest waits in
memory (``StereoTimeline``).
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import soundfile as sf  # type: ignore[import-untyped]

from ..sinks.recorded import HeardUtterance
from ..vocab.audio import Samples, resample
from .stereo_timeline import LEFT, RIGHT, StereoTimeline

RATE = 16_000  # speech: a call's 8 kHz and a browser's 16 kHz both fit
HOLD_S = 1.0  # the user's channel is written this far behind its latest frame
RESYNC_S = 0.5  # a frame this far from where its stream's count puts it: a gap
# The names this module writes: only these are ever deleted by ``keep_days``.
NAME = re.compile(r"\d{8}T\d{6}Z-[A-Za-z0-9_-]{1,64}\.(?:wav|jsonl)")


class ConversationRecording:
    def __init__(self, folder: Path, name: str, header: dict[str, Any]) -> None:
        """Open ``folder/<UTC time>-<name>.wav`` and ``.jsonl`` (``OSError`` if it
        cannot); ``header`` is the transcript's first line, with the files' names."""
        self.started_ns = time.perf_counter_ns()
        stem = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{name}"
        folder.mkdir(parents=True, exist_ok=True)
        self.wav_path, self.transcript_path = folder / f"{stem}.wav", folder / f"{stem}.jsonl"
        self.timeline = StereoTimeline(RATE, self.started_ns)
        self._wav = sf.SoundFile(self.wav_path, "w", RATE, 2, "PCM_16")
        try:
            self._transcript = self.transcript_path.open("w", encoding="utf-8")
        except OSError:
            self._wav.close()
            raise
        self._user_next: int | None = None  # where the user's stream continues
        self._playing_since: int | None = None  # an utterance began and has not ended
        self._write_line(
            {
                "recording": self.wav_path.name,
                "started": datetime.now(UTC).isoformat(timespec="seconds"),
                "sample_rate": RATE,
                "channels": ["user", "assistant"],
                **header,
            }
        )

    # What is heard

    def user_frame(self, samples: Samples, rate: int, at_ns: int) -> None:
        """A frame of the user's voice, received at ``at_ns`` (it ends there)."""
        if rate != RATE:
            samples = resample(samples, rate, RATE)
        at = self.timeline.at(at_ns) - len(samples)
        if self._user_next is not None and abs(at - self._user_next) < RESYNC_S * RATE:
            at = self._user_next
        self.timeline.place(LEFT, samples, at)
        self._user_next = at + len(samples)
        self._write_settled()

    def began(self, at_ns: int) -> None:
        if self._playing_since is None:
            self._playing_since = self.timeline.at(at_ns)

    def heard(self, utterance: HeardUtterance) -> None:
        """The assistant's utterance as heard: from where it began to play, held
        over its pauses, up to where it was cut."""
        self._playing_since = None
        if utterance.first_played_ns is not None:
            heard = utterance.heard
            if utterance.rate != RATE:
                heard = resample(heard, utterance.rate, RATE)
            at, done = self.timeline.at(utterance.first_played_ns), 0
            for paused_ns, resumed_ns in sorted(utterance.pauses):
                played = max(0, self.timeline.at(paused_ns) - at)
                self.timeline.place(RIGHT, heard[done : done + played], at)
                done += played
                at = max(at + played, self.timeline.at(resumed_ns))
            self.timeline.place(RIGHT, heard[done:], at)
        self._write_settled()

    def said(self, speaker: str, text: str, at_ns: int, **fields: Any) -> None:
        """A line of the transcript: ``speaker`` said ``text`` at ``at_ns``."""
        at_s = round(max(0, at_ns - self.started_ns) / 1e9, 3)
        self._write_line({"at_s": at_s, "speaker": speaker, "text": text, **fields})

    def close(self) -> None:
        """Everything placed written out, the files closed."""
        try:
            now = self.timeline.at(time.perf_counter_ns())
            self._wav.write(self.timeline.take(max(now, self.timeline.end)))
        finally:
            self._wav.close()
            self._transcript.close()

    # Writing

    def _write_settled(self) -> None:
        until = self.timeline.at(time.perf_counter_ns()) - round(HOLD_S * RATE)
        if self._playing_since is not None:
            until = min(until, self._playing_since)
        if until - self.timeline.start >= RATE // 10:  # (a tenth of a second at a time)
            self._wav.write(self.timeline.take(until))

    def _write_line(self, record: dict[str, Any]) -> None:
        self._transcript.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._transcript.flush()


def prune(folder: Path, keep_days: float, now_s: float) -> int:
    """Delete this module's recordings in ``folder`` older than ``keep_days``
    (by their files' times); how many files went. Other files are left alone."""
    if not folder.is_dir():
        return 0
    removed = 0
    for path in folder.iterdir():
        if not NAME.fullmatch(path.name):
            continue
        try:
            if path.stat().st_mtime < now_s - keep_days * 86400:
                path.unlink()
                removed += 1
        except FileNotFoundError:  # (another process pruned it first)
            continue
    return removed

"""A conversation's recording (``[recording]``, docs/recording.md) as a face
runs it (a served session or call, ``run --input`` / ``--listen``): its sink
wrapped so the assistant's voice is written as heard, its files open for the
conversation's life, the user's frames and each turn's lines written down.

A recording that cannot be written (the folder not writable, the disk full)
is one ``recording_failed`` line and the conversation goes on unrecorded: a
call is never dropped for its recording.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from ..sinks.base import AudioSink
from ..sinks.recorded import HeardUtterance, RecordedSink
from ..sources.base import Frame
from .conversation_recording import ConversationRecording, prune
from .recording_config import RecordingConfig
from .turn import TurnResult

Log = Callable[..., None]  # (event, **fields): serve's log, or a terminal's line


class SessionRecorder:
    def __init__(
        self, settings: RecordingConfig, session: str, header: dict[str, Any], log: Log
    ) -> None:
        assert settings.dir is not None
        self.folder, self.keep_days = Path(settings.dir), settings.keep_days
        self.session, self.header, self.log = session, header, log
        self.recording: ConversationRecording | None = None  # while the conversation runs
        self._played_ns: int | None = None  # when the last utterance began to play
        self.turn = 0  # the last turn the user's words were written down for

    def wrap(self, sink: AudioSink) -> AudioSink:
        return RecordedSink(sink, self)

    @contextlib.contextmanager
    def opened(self) -> Iterator[None]:
        """The files, open while the conversation is held, then closed."""
        try:
            if self.keep_days is not None:
                prune(self.folder, self.keep_days, time.time())
            self.recording = ConversationRecording(
                self.folder, self.session, {"session": self.session, **self.header}
            )
        except OSError as exc:
            self._failed(exc)
        else:
            self.log("recording", session=self.session, path=str(self.recording.wav_path))
        try:
            yield
        finally:
            recording, self.recording = self.recording, None
            if recording is not None:
                try:
                    recording.close()
                except OSError as exc:
                    self._failed(exc)

    # What is heard and said (sinks.recorded.Recorder, and the session's hooks)

    def began(self, at_ns: int) -> None:
        if self.recording is not None:
            self.recording.began(at_ns)

    def heard(self, utterance: HeardUtterance) -> None:
        self._played_ns = utterance.first_played_ns  # (the turn's, reported next)
        self._guarded(lambda r: r.heard(utterance))

    def user_frame(self, frame: Frame) -> None:
        self._guarded(lambda r: r.user_frame(frame.samples, frame.sample_rate, frame.captured_ns))

    async def frames(self, frames: AsyncIterator[Frame]) -> AsyncIterator[Frame]:
        """``frames``, each written down as it passes."""
        async for frame in frames:
            self.user_frame(frame)
            yield frame

    def said(self, text: str, turn: int, source: str, at_ns: int | None = None) -> None:
        """The user's words of turn ``turn`` (typed or heard), said at ``at_ns``."""
        self.turn = turn
        at = time.perf_counter_ns() if at_ns is None else at_ns
        self._guarded(lambda r: r.said("user", text, at, turn=turn, source=source))

    def answered(self, turn: int, result: TurnResult) -> None:
        """What was heard of turn ``turn``'s reply, at the time it began to play."""
        played_ns, self._played_ns = self._played_ns, None
        at = time.perf_counter_ns() if played_ns is None else played_ns
        heard, interrupted = result.spoken_text, result.interrupted
        self._guarded(lambda r: r.said("assistant", heard, at, turn=turn, interrupted=interrupted))

    def _guarded(self, write: Any) -> None:
        """A write that fails stops the recording, not the conversation."""
        recording = self.recording
        if recording is None:
            return
        try:
            write(recording)
        except OSError as exc:
            self.recording = None
            self._failed(exc)
            with contextlib.suppress(Exception):
                recording.close()

    def _failed(self, exc: OSError) -> None:
        reason = exc.strerror or str(exc)
        self.log("recording_failed", session=self.session, message=f"{self.folder}: {reason}")

"""The audio side of a turn: the stages from the speakable pieces to the sink
(``TtsStage`` → ``SinkStage``; the graph and the items between them:
``stream_items.py``), and where each piece lies on the sink's timeline."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.lowlevel import checkpoint_if_cancelled
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from ..infra.exception_groups import leaves
from ..sinks.base import AudioSink
from ..telemetry.spans import epoch_ns, tracer
from ..tts.base import Alignment, TtsEngine, TtsError, TtsStream
from ..tts.retrying import counting_retries
from ..vocab.audio import AudioChunk, resample
from ..vocab.spacing import spaced
from .event_log import EventLogger
from .metrics import PieceMetrics, TurnMetrics
from .scheduling import FirstAudioPriority
from .stream_items import Piece, PieceAudio


class TtsStage:
    """Speaks the pieces through one ``TtsStream`` for the turn: one task pushes
    the pieces as they come, this one passes the audio on in text order.

    A TTS error ends the speech but not the reply: the pieces still coming are
    read and dropped, so the reply's text is whole in the transcript, and the
    turn reports the error (``error``). It tells ``priority`` of each piece
    handed over and each audio chunk back (``scheduling.py``)."""

    def __init__(
        self,
        engine: TtsEngine,
        log: EventLogger,
        m: TurnMetrics,
        priority: FirstAudioPriority | None = None,
    ) -> None:
        self.engine, self.log, self.m = engine, log, m
        self.priority = priority if priority is not None else FirstAudioPriority(False)
        self.error: str | None = None
        self._texts: list[str] = []
        # Each piece's span (a TTS request), from its push until the audio of a
        # later piece begins or the stream ends: by piece index, open ones only.
        self._spans: dict[int, Span] = {}

    async def run(self, inp: ObjectReceiveStream[Piece], out: ObjectSendStream[PieceAudio]) -> None:
        async with inp, out:
            try:
                with counting_retries(self.m.tts_retries):
                    async with self.engine.open_stream() as stream:
                        self.m.tts_stats = stream.stats
                        async with anyio.create_task_group() as feeding:
                            feeding.start_soon(self._feed, inp, stream)
                            await self._read(stream, out)
            except* TtsError as group:
                errors = leaves(group)
                self.error = "; ".join(str(e) for e in errors)
                self.m.tts_error = getattr(errors[0], "kind", "engine")
            finally:
                self.priority.release()  # no more audio is coming: nothing to wait for
                self._end_spans(len(self.m.pieces))
            async for _ in inp:
                pass  # spoken no more, but the reply goes on to its end

    async def _feed(self, inp: ObjectReceiveStream[Piece], stream: TtsStream) -> None:
        timer = self.m.stages["tts"]
        async for piece in inp:
            text = piece.chunk.text.strip()
            if not text:
                continue
            started = time.perf_counter_ns()
            self.log({"event": "tts_input", "text": text})
            self._texts.append(piece.chunk.text)
            self.m.pieces.append(PieceMetrics(chars=len(text)))
            index = len(self.m.pieces) - 1
            self._spans[index] = tracer().start_span(
                "voice.tts.request",
                attributes={
                    "voice.tts.engine": self.engine.name,
                    "voice.piece.index": index,
                    "voice.piece.chars": len(text),
                },
            )
            self.priority.piece_pushed(index)
            await stream.push(text)
            sent = time.perf_counter_ns()
            self.m.pieces[-1].sent_ns = sent
            self.m.stamp("tts_request", sent)
            timer.busy_ns += sent - started
            timer.items += 1
        await stream.end_input()

    async def _read(self, stream: TtsStream, out: ObjectSendStream[PieceAudio]) -> None:
        async for voiced in stream:
            piece = self.m.pieces[voiced.piece]
            if piece.first_audio_ns is None:
                piece.first_audio_ns = voiced.t_ns
                self.m.stamp("tts_first_byte", voiced.t_ns)
                span = self._spans.get(voiced.piece)
                if span is not None:
                    span.add_event("first_byte", timestamp=epoch_ns(voiced.t_ns))
                self._end_spans(voiced.piece)
            piece.audio_seconds += voiced.audio.seconds
            self.m.audio_seconds += voiced.audio.seconds
            self.m.note_audio(voiced.t_ns, voiced.audio.seconds)
            self.priority.audio(voiced.piece, voiced.audio.seconds, voiced.t_ns)
            text = self._texts[voiced.piece]
            await out.send(PieceAudio(voiced.piece, text, voiced.audio, voiced.alignment))

    def _end_spans(self, before: int) -> None:
        """End the spans of the pieces before ``before`` (their audio is all in)."""
        for index in [i for i in self._spans if i < before]:
            span = self._spans.pop(index)
            piece = self.m.pieces[index]
            attributes: dict[str, AttributeValue] = {
                "voice.piece.audio_seconds": round(piece.audio_seconds, 3)
            }
            if piece.first_byte_ms is not None:
                attributes["voice.tts.first_byte_ms"] = round(piece.first_byte_ms, 3)
            span.set_attributes(attributes)
            span.end()


@dataclass(slots=True)
class SpokenPiece:
    """Where a piece's audio lies on the sink's timeline (seconds since the turn
    began); ``aligned``: its audio came with character timings."""

    text: str
    start_s: float
    end_s: float | None = None
    aligned: bool = False


class SinkStage:
    """Writes each piece's audio to the sink in frames of ``FRAME_SECONDS`` (or the
    sink's ``write_block_s``, for a sink that paces its own frames) and
    records where each piece, and each aligned character, lies on the sink's
    timeline (``pieces``, ``char_ends``: what was heard is read from them).

    Small frames keep every ``write`` short: a real-time sink's write of a whole
    sentence would block until its end fits in the buffer. ``first_audio`` is not
    stamped when a write returns but taken from the sink: the moment playback
    took the turn's first sample (``AudioSink.first_played_ns``).
    """

    def __init__(
        self,
        sink: AudioSink,
        m: TurnMetrics,
        on_piece_start: Callable[[str], None],
        priority: FirstAudioPriority | None = None,
    ) -> None:
        self.sink, self.m, self.on_piece_start = sink, m, on_piece_start
        self.priority = priority if priority is not None else FirstAudioPriority(False)
        self.pieces: list[SpokenPiece] = []
        self.char_ends: list[tuple[str, float]] = []  # aligned characters, when each ends
        self.written_s = 0.0
        self._index: int | None = None
        # A sink that paces its own frames (the socket sink) takes larger writes:
        # fewer passes of this loop per second of audio.
        self._block_s = float(getattr(sink, "write_block_s", FRAME_SECONDS))

    def note_first_audio(self) -> None:
        """Stamp ``first_audio`` from the sink, once playback has taken this turn's
        audio. Checked after every write and at the end of the turn (after
        ``drain`` or ``stop``), so an interrupted turn that was heard has it too."""
        if self.written_s > 0 and "first_audio" not in self.m.stamps:
            played_ns = self.sink.first_played_ns
            # An earlier time is an earlier turn's, whose utterance was never ended
            # (that turn was cancelled from outside, with no drain or stop).
            if played_ns is not None and played_ns >= self.m.started_ns:
                self.m.stamp("first_audio", played_ns)

    def _start_piece(self, item: PieceAudio) -> None:
        if self.pieces:
            self.pieces[-1].end_s = self.written_s
        text = item.text
        if self.pieces and spaced(self.pieces[-1].text, text):
            text = " " + text  # pieces of two text blocks: keep the words apart (not "Paris .")
        self.pieces.append(SpokenPiece(text, self.written_s, aligned=item.alignment is not None))
        self._index = item.index
        self.on_piece_start(text)

    def _place_chars(self, alignment: Alignment, piece_start: bool) -> None:
        base = self.written_s
        chars = self.char_ends
        if piece_start and alignment.chars and chars and spaced(chars[-1][0], alignment.chars[0]):
            chars.append((" ", base))  # keep the words of two pieces apart
        for char, start, duration in zip(
            alignment.chars, alignment.start_ms, alignment.duration_ms, strict=True
        ):
            chars.append((char, base + (start + duration) / 1000))

    async def run(self, inp: ObjectReceiveStream[PieceAudio]) -> None:
        timer = self.m.stages["sink"]
        async with inp:
            async for item in inp:
                piece_start = item.index != self._index
                if piece_start:
                    self._start_piece(item)
                if item.alignment is not None:
                    self._place_chars(item.alignment, piece_start)
                started = time.perf_counter_ns()
                if self.sink.sample_rate and item.audio.sample_rate != self.sink.sample_rate:
                    self.m.resampled_seconds += item.audio.seconds
                for frame in _frames(item.audio, self.sink.sample_rate, self._block_s):
                    # A write may queue audio before its first checkpoint: once the
                    # turn is interrupted (and the sink silenced), write nothing more.
                    await checkpoint_if_cancelled()
                    await self.sink.write(frame)
                    self.written_s += frame.seconds
                    self.note_first_audio()
                    if piece_start:  # the piece's first audio is in: the LLM may go on
                        self.priority.played(item.index)
                        piece_start = False
                timer.add(started)
            if self.pieces:
                self.pieces[-1].end_s = self.written_s
            await self.sink.drain()
            self.note_first_audio()
            if self.written_s > 0:
                self.m.stamp("last_audio")


FRAME_SECONDS = 0.02


def _frames(
    audio: AudioChunk, sink_rate: int, frame_s: float = FRAME_SECONDS
) -> Iterator[AudioChunk]:
    """``audio`` in frames of ``frame_s``. Resampled to the sink's rate first
    (when the sink has one): resampling each frame on its own would break the
    waveform at every frame boundary."""
    if sink_rate and audio.sample_rate != sink_rate:
        audio = AudioChunk(resample(audio.samples, audio.sample_rate, sink_rate), sink_rate)
    step = max(1, round(audio.sample_rate * frame_s))
    samples = audio.samples
    for start in range(0, len(samples), step):
        yield AudioChunk(samples[start : start + step], audio.sample_rate)

"""``voice-membrane run --input FILE.wav`` / ``--listen``: a conversation by voice.

The user's voice comes from a WAV file played in real time as if spoken
(``--input``) or from the microphone (``--listen``); what they say is shown as
it is recognized (partials dimmed on a terminal), each turn is answered out
loud as ``run`` answers a typed line, and each turn's latency table ends with
its voice-to-voice latency (end of speech → first audio).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from ..infra.heap import settle_heap
from ..infra.redact import quote, redact
from ..listening.decisions import Interrupt
from ..pipeline.build import Parts, build_parts, session_for
from ..pipeline.config import ConfigError, PipelineConfig
from ..pipeline.echo_intake import EchoIntake, Where, echo_intake_for
from ..pipeline.event_log import JsonlEventLog, OutputFileError
from ..pipeline.listen_build import listener_for, stt_for
from ..pipeline.listening import (
    BargeIn,
    Heard,
    Listener,
    ListenError,
    ListenItem,
    NoWordsHeard,
    UserTurn,
    UtteranceCapped,
)
from ..pipeline.session import Session
from ..pipeline.session_recording import SessionRecorder
from ..pipeline.turn import Turn
from ..pipeline.voice_loop import VoiceTurn, converse, turn_record
from ..sinks.speaker import SpeakerSink
from ..sources.base import AudioSource, SourceError
from ..sources.microphone import MicrophoneSource, input_available
from ..sources.wav_file import WavFileSource
from ..stt.base import SttEngine, SttError
from .run import check_output_paths, check_speaker, interrupt_on_sigint, redacting, say_result

_DIM, _PLAIN, _CLEAR = "\x1b[2m", "\x1b[0m", "\r\x1b[K"


async def run_listening(
    config: PipelineConfig,
    *,
    input_path: Path | None,
    metrics_json: Path | None = None,
    events_jsonl: Path | None = None,
    out: Callable[[str], None] = lambda text: print(text, end="", flush=True),
    terminal: bool | None = None,
) -> list[VoiceTurn]:
    """Listen to ``input_path`` (None: the microphone) until it ends (Ctrl-C
    twice for the microphone) and answer each turn. ``ConfigError`` (one line)
    before anything loads for a bad configuration, a missing, empty or
    unreadable file, or no microphone; ``ListeningInterrupted`` once everything
    is closed and written if Ctrl-C ended it."""
    out = redacting(out)
    terminal = sys.stdout.isatty() if terminal is None else terminal
    check_output_paths(metrics_json, events_jsonl)
    check_speaker(config)
    if input_path is not None:
        try:  # a missing, empty or unreadable file: said before the models load
            WavFileSource(input_path).check()
        except SourceError as exc:
            raise ConfigError(f"--input {exc}") from None
    if input_path is not None and "echo" not in config.endpoint.model_fields_set:
        # A recording cannot hear the speaker: no echo of the reply to guard against.
        config = config.with_overrides({"endpoint": {"echo": "aec"}})
    if input_path is None:
        reason = input_available()
        if reason is not None:
            raise ConfigError(reason)
    stt = stt_for(
        config, on_retry=lambda e, d: out(f"speech to text: retrying in {d:.1f} s: {e}\n")
    )
    parts = build_parts(config)  # (made, not loaded)
    try:  # a model that does not load: one line before the LLM and the voice load
        await stt.start()
    except SttError as exc:
        raise ConfigError(f"stt {quote(config.stt.spec)}: {exc}") from None  # as create_stt says
    try:
        return await _converse(
            config, parts, stt, input_path, metrics_json, events_jsonl, out, terminal
        )
    finally:
        await stt.aclose()


async def _converse(
    config: PipelineConfig,
    parts: Parts,
    stt: SttEngine,
    input_path: Path | None,
    metrics_json: Path | None,
    events_jsonl: Path | None,
    out: Callable[[str], None],
    terminal: bool,
) -> list[VoiceTurn]:
    source: AudioSource
    if input_path is not None:
        source = WavFileSource(input_path, rate=stt.sample_rate, realtime=True)
    else:
        source = MicrophoneSource(rate=stt.sample_rate)
    intake = _echo_intake(config, parts, stt.sample_rate, input_path is None)
    jsonl = JsonlEventLog(events_jsonl) if events_jsonl else None

    def on_turn_start(turn: Turn) -> None:
        if jsonl:
            jsonl.start_turn(turn.metrics.started_ns)

    recorder = _recorder(config, input_path, out)
    session = session_for(
        config,
        parts,
        sink=parts.sink if recorder is None else recorder.wrap(parts.sink),
        log=jsonl if jsonl else lambda record: None,
        on_piece_start=out,
        on_turn_start=on_turn_start,
    )
    out(f"loading {parts.membrane.provider.name}, {parts.engine.name} and {stt.name} …\n")
    turns: list[VoiceTurn] = []
    quit_by_user = False

    def on_quit() -> None:
        nonlocal quit_by_user
        quit_by_user = True

    try:
        listener = listener_for(
            config, stt, recording=input_path is not None, echo_cancelled=intake is not None
        )
        async with session, source, anyio.create_task_group() as tg:
            settle_heap()
            # Ctrl-C is ours before the user is told to speak.
            await tg.start(interrupt_on_sigint, session, tg.cancel_scope, on_quit)
            heard_from = "the microphone" if input_path is None else str(input_path)
            out(f"listening to {heard_from} (Ctrl-C interrupts the speech)\n")
            greeting = Greeting(session, listener, out, recorder)
            frames = source.frames() if recorder is None else recorder.frames(source.frames())
            numbers = itertools.count(1)  # the user's turns, as each becomes theirs
            with recorder.opened() if recorder is not None else contextlib.nullcontext():
                tg.start_soon(greeting.run)
                turns = await converse(
                    session,
                    listener,
                    frames if intake is None else intake.frames(frames),
                    on_item=lambda item: _show(item, out, terminal),
                    on_turn_start=lambda heard: _heard(
                        heard, next(numbers), out, terminal, recorder
                    ),
                    on_turn=lambda turn: _report(turn, out, recorder),
                    wait_idle=greeting.interrupt,
                )
                await greeting.done.wait()  # (the input ended: a greeting still said finishes)
            tg.cancel_scope.cancel()
    except SourceError as exc:
        out(f"{exc}\n")
    finally:
        if jsonl:
            jsonl.close()
    if not turns and not quit_by_user:
        out("no turn: nothing was heard that could be answered\n")
    if parts.wav_path is not None and any(t.result.report.audio_seconds > 0 for t in turns):
        out(f"audio written to {parts.wav_path}\n")
    if metrics_json is not None:
        _write(metrics_json, [turn_record(turn) for turn in turns])
    if quit_by_user:
        raise ListeningInterrupted(turns)
    return turns


def _echo_intake(
    config: PipelineConfig, parts: Parts, rate: int, microphone: bool
) -> EchoIntake | None:
    """The echo canceller between the speaker and the microphone: fed what the
    speaker plays, in front of the listener (``[sink] echo_canceller``)."""
    speaker = parts.sink if isinstance(parts.sink, SpeakerSink) else None
    where: Where = "speaker" if microphone and speaker is not None else "recording"
    intake = echo_intake_for(config, where, rate)
    if intake is not None and speaker is not None:
        speaker.on_played = intake.played
    return intake


class Greeting:
    """The pipeline's greeting (``[conversation]``), said as the listening
    starts and heard as a reply is: speech over it pauses it, words interrupt
    it, and the user's turn waits for it to end (``interrupt``: converse's
    ``wait_idle``)."""

    def __init__(
        self,
        session: Session,
        listener: Listener,
        out: Callable[[str], None],
        recorder: SessionRecorder | None = None,
    ) -> None:
        self.session, self.listener, self.out = session, listener, out
        self.recorder = recorder
        self.done = anyio.Event()

    async def run(self) -> None:
        self.listener.assistant_speaking(True)
        try:
            result = await self.session.greet()
            if result is not None:
                say_result(result, self.out)
                if self.recorder is not None:
                    self.recorder.answered(0, result)  # (turn 0: before the user's first)
        finally:
            self.listener.assistant_speaking(False)
            self.done.set()

    async def interrupt(self) -> None:
        """Before a spoken turn: the greeting, if still said, is cut and its end awaited."""
        while not self.done.is_set():
            self.session.interrupt()
            with anyio.move_on_after(0.05):  # (its turn may not have begun yet)
                await self.done.wait()


class ListeningInterrupted(Exception):
    """Ctrl-C ended the listening (no turn was being spoken): what was said
    then is lost, the turns before it are in ``turns`` (and every file written)."""

    def __init__(self, turns: list[VoiceTurn]) -> None:
        super().__init__("interrupted")
        self.turns = turns


def _show(item: ListenItem, out: Callable[[str], None], terminal: bool) -> None:
    if isinstance(item, Heard) and not item.transcript.final and terminal:
        out(f"{_CLEAR}{_DIM}… {item.transcript.text}{_PLAIN}")  # replaced by the next
    elif isinstance(item, ListenError):
        out(f"{_CLEAR if terminal else ''}listening: {item.message}\n")
    elif isinstance(item, UtteranceCapped):
        out(
            f"{_CLEAR if terminal else ''}listening: {item.max_s:g} s of speech without a "
            "pause: that is the turn (endpoint.max_utterance_s)\n"
        )
    elif isinstance(item, NoWordsHeard):
        out(
            f"{_CLEAR if terminal else ''}listening: {item.speech_s:.1f} s of sound up to "
            f"{item.at_s:.1f} s had no words in it (music, noise, or a language the "
            "recognizer does not know): no turn\n"
        )
    elif isinstance(item, BargeIn) and isinstance(item.decision, Interrupt):
        out(f"\n[you spoke over the answer: {item.decision.text}]\n")


def _heard(
    heard: UserTurn,
    n: int,
    out: Callable[[str], None],
    terminal: bool,
    recorder: SessionRecorder | None,
) -> None:
    out(f"{_CLEAR if terminal else ''}> {heard.text}\n")
    if recorder is not None:
        recorder.said(heard.text, n, "voice", heard.speech_start_ns)


def _report(turn: VoiceTurn, out: Callable[[str], None], recorder: SessionRecorder | None) -> None:
    say_result(turn.result, out)
    out(turn.latency.line(turn.result.report.end) + "\n")
    if recorder is not None:  # (the answer of the turn last begun)
        recorder.answered(recorder.turn, turn.result)


def _recorder(
    config: PipelineConfig, input_path: Path | None, out: Callable[[str], None]
) -> SessionRecorder | None:
    """The conversation written down when the pipeline records (``[recording]``)."""
    if config.recording.dir is None:
        return None

    def note(event: str, **fields: Any) -> None:
        if event == "recording":
            out(f"recording to {fields['path']}\n")
        else:
            out(f"recording: cannot write {fields['message']}: not recorded\n")

    heard_from = "microphone" if input_path is None else str(input_path)
    return SessionRecorder(config.recording, "listen", {"input": heard_from}, note)


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    try:
        path.write_text(redact(json.dumps(records, indent=2)) + "\n", encoding="utf-8")
    except OSError as exc:
        raise OutputFileError(f"cannot write {path}: {exc.strerror or exc}") from exc

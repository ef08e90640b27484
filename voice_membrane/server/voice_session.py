"""The listening half of a served session (protocol 1.1): the client's voice
in, its user turns and the listening events out.

``VoiceInput`` takes the client's binary frames (``feed``), and ``run`` holds
the conversation over them (``pipeline.voice_loop.converse``: detector, STT,
endpointer, barge-in, preemptive replies) until the input closes. What the
client should see is given to ``VoiceHooks``: events to send, and the turns it
starts and ends — the connection numbers and reports them like typed turns.
Push to talk: ``press`` / ``release`` place the button at the audio received
so far.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import soundfile as sf  # type: ignore[import-untyped]

from ..listening.decisions import Interrupt, PausePlayout
from ..listening.push_to_talk import PushToTalk
from ..pipeline.echo_intake import EchoIntake
from ..pipeline.listening import (
    BargeIn,
    FrameInlet,
    Heard,
    Listener,
    ListenError,
    ListenItem,
    NoWordsHeard,
    SpeechBegan,
    SpeechEnded,
    UserTurn,
    UtteranceCapped,
)
from ..pipeline.session import Session
from ..pipeline.voice_loop import VoiceTurn, converse
from ..sources.base import Frame
from . import protocol as p
from .voice_input import InputDecoder

# Audio waiting for the listener, at most: what may arrive at once — the
# client's burst (voice_input.AUDIO_BURST_S) and what waited in the socket
# through a stall of the server's loop (as long again and more) — in frames
# as short as are charged (10 ms). Only a listener far behind (an overloaded
# process) goes past it; frames are dropped then, rather than block the socket.
MAX_BACKLOG_S = 10.0
MAX_BACKLOG_FRAMES = math.ceil(MAX_BACKLOG_S / p.MIN_INPUT_FRAME_S)
# Pushed after a push-to-talk release, so the release is heard even if the
# client sends nothing more (outside a press it need not send audio).
_RELEASE_PAD_S = 0.01


class VoiceHooks(Protocol):
    def event(self, text: str) -> None:
        """Send a listening event (``protocol.event`` text)."""

    def voice_turn_started(self, heard: UserTurn) -> None:
        """The user's turn starts a reply (or a held one is now theirs)."""

    def voice_turn_ended(self, turn: VoiceTurn) -> None:
        """The reply ended (finished, interrupted or failed)."""

    def held_reply_discarded(self) -> None:
        """A reply started early was thrown away unheard."""

    def barge_in(self, action: str, text: str | None) -> None:
        """Speech over the assistant paused, resumed or interrupted its reply."""

    def speech_started(self) -> None:
        """The user began to speak (activity: the session is not idle)."""

    def stt_failed(self, message: str) -> None:
        """An STT stream failed (refused, dropped): its utterance is dropped, the
        session goes on; say so (``stt_error``) and log what the STT answered."""

    def utterance_capped(self, at_ms: float, max_s: float) -> None:
        """A stretch of speech reached ``max_utterance_s``: it is ended there."""

    def no_words(self, at_ms: float, speech_ms: float) -> None:
        """Speech the detector heard settled with no words (music, noise,
        another language): no turn; say so (``no_words``)."""

    async def wait_idle(self) -> None:
        """Return once no other turn runs (a typed one is interrupted)."""


class VoiceInput:
    def __init__(
        self,
        declared: p.InputAudio,
        session: Session,
        listener: Listener,
        hooks: VoiceHooks,
        button: PushToTalk | None = None,
        echo: EchoIntake | None = None,
    ) -> None:
        self.session, self.listener, self.hooks, self.button = session, listener, hooks, button
        self.echo = echo  # the input's echo canceller, told what the sink sends
        self.declared = declared
        self.decoder = InputDecoder(declared, listener.vad.sample_rate)
        self.inlet = FrameInlet(MAX_BACKLOG_FRAMES)  # to the listener's queue; counts drops
        self._max_behind = round(MAX_BACKLOG_S * self.decoder.rate)  # samples not yet heard
        self._recording: Any = None  # a soundfile.SoundFile
        self.on_frame: Callable[[Frame], None] | None = None  # each frame as received

    def record_to(self, recording: Any) -> None:
        """Write the input, as the listener hears it, to ``recording`` (a debug folder)."""
        self._recording = recording

    def feed(self, data: bytes) -> None:
        """One binary frame (``decoder.check``ed) of the client's voice."""
        frame = self.decoder.decode(data)
        if self.on_frame is not None:  # (as the user said it: before the echo is taken out)
            self.on_frame(frame)
        if self.echo is not None:
            frame = self.echo.clean(frame)
            if not len(frame.samples):
                return  # (whole 10 ms blocks: the rest comes with the next frame)
        if frame.end - self.listener.vad.samples_fed > self._max_behind:
            self.inlet.dropped += 1  # the listener is that far behind: lost, as in a full queue
            return
        self._put(frame)

    def _put(self, frame: Frame) -> None:
        if self._recording is not None:
            self._recording.write(frame.samples)
        self.inlet.put(frame)

    def press(self) -> bool:
        """Push to talk: the button went down now; False if it was down already."""
        assert self.button is not None
        return self.button.press(self.decoder.position)

    def release(self) -> bool:
        """Push to talk: the button came up now; False if it was not down."""
        assert self.button is not None
        if not self.button.release(self.decoder.position):
            return False
        rate = self.decoder.rate
        pad = np.zeros(math.ceil(_RELEASE_PAD_S * rate), dtype=np.int16)
        self._put(Frame(pad, rate, self.decoder.position, time.perf_counter_ns()))
        self.decoder.position += len(pad)
        return True

    def close(self) -> None:
        """No more input: what was heard settles, the reply playing may finish."""
        self.inlet.close()

    async def run(self) -> None:
        """Hold the conversation until the input closes."""
        await converse(
            self.session,
            self.listener,
            self.inlet,
            on_item=self._on_item,
            on_turn_start=self.hooks.voice_turn_started,
            on_turn=self.hooks.voice_turn_ended,
            on_discarded=self.hooks.held_reply_discarded,
            wait_idle=self.hooks.wait_idle,
        )

    def _on_item(self, item: ListenItem) -> None:
        hooks = self.hooks
        if isinstance(item, SpeechBegan):
            hooks.speech_started()
            hooks.event(p.event("vad.speech_start", at_ms=_ms(item.at_s)))
        elif isinstance(item, SpeechEnded):
            hooks.event(p.event("vad.speech_end", at_ms=_ms(item.at_s)))
        elif isinstance(item, Heard):
            t = item.transcript
            if not t.final:
                hooks.event(p.event("transcript.partial", text=t.text))
            elif t.text.strip():
                hooks.event(
                    p.event(
                        "transcript.final",
                        text=t.text.strip(),
                        start_ms=None if t.start_s is None else _ms(item.stream_from_s + t.start_s),
                        end_ms=None if t.end_s is None else _ms(item.stream_from_s + t.end_s),
                    )
                )
        elif isinstance(item, BargeIn):
            decision = item.decision
            if isinstance(decision, Interrupt):
                hooks.barge_in("interrupt", decision.text)
            elif isinstance(decision, PausePlayout):
                hooks.barge_in("pause", None)
            else:
                hooks.barge_in("resume", None)
        elif isinstance(item, ListenError):
            hooks.stt_failed(item.message)
        elif isinstance(item, UtteranceCapped):
            hooks.utterance_capped(_ms(item.at_s), item.max_s)
        elif isinstance(item, NoWordsHeard):
            hooks.no_words(_ms(item.at_s), _ms(item.speech_s))


@contextmanager
def input_recording(path: Path, voice: VoiceInput) -> Iterator[Any]:
    """A WAV file for ``voice``'s input at the listener's rate, closed on exit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sf.SoundFile(path, "w", voice.decoder.rate, 1, "PCM_16") as recording:
        yield recording


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)

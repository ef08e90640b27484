"""First-audio priority: the LLM waits while the TTS engine makes a piece's first audio.

When the LLM and the TTS engine both compute on this machine (the embedded
model and Piper, say), they compete for the same cores. A token the LLM
computes while the engine synthesizes the first piece delays the first audio
the user hears; the same token computed a moment later, while that audio plays,
costs nothing. So a turn with priority on asks the LLM for nothing more from
the first piece's hand-over to the engine until its first audio, and likewise
for a later piece while the audio queued ahead of playback is short (under
``ahead_s``): that is when a slow piece would be heard as a gap. Otherwise the
LLM runs freely and stays far ahead of playback (an embedded model makes a
second of speech's words in well under a second).

The hold is on asking for the next reply item (``ReplyStage``), so it costs an
LLM at most the step it is computing. It ends when the sink has taken the
piece's first audio (``SinkStage``), so nothing competes with the first audio's
way to the sink either; it is bounded (``max_hold_s``) and also ends when a
later piece is played or the engine's stream ends, so a piece that makes no
audio never stalls the reply.

Whether it is on: ``[scheduling] first_audio_priority`` — ``"auto"`` (on when
both engines are ``local``, computing on this machine; a cloud service does not
contend for its CPU), ``true`` or ``false``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import anyio

from ..providers.local_llama import default_n_threads
from .config import PRIORITY_AHEAD_S, PrioritySetting, SchedulingConfig

MAX_HOLD_S = 1.0  # never hold the LLM longer than this, whatever the engine does
AHEAD_S = PRIORITY_AHEAD_S  # later pieces get priority while less audio than this is queued


def computes_locally(part: object) -> bool:
    """Whether an LLM provider or TTS engine computes on this machine's CPU: it
    says so with ``local = True`` (every ``TtsEngine`` says either; an LLM
    provider only when it runs an embedded model)."""
    return bool(getattr(part, "local", False))


def priority_on(setting: PrioritySetting, llm: object, engine: object) -> bool:
    """The setting decided: ``"auto"`` is on when both parts compute locally."""
    if setting == "auto":
        return computes_locally(llm) and computes_locally(engine)
    return bool(setting)


class FirstAudioPriority:
    """One turn's priority state, shared by its reply stage (which waits in
    ``llm_may_go_on``), its TTS stage (which reports pieces handed over and the
    audio made) and its sink stage (which reports each piece's first audio taken).

    ``holds`` counts the pieces the LLM was held for; ``held_ns`` how long it
    waited in all."""

    def __init__(
        self, enabled: bool, *, ahead_s: float = AHEAD_S, max_hold_s: float = MAX_HOLD_S
    ) -> None:
        self.enabled = enabled
        self.ahead_s = ahead_s
        self.max_hold_s = max_hold_s
        self.holds = 0
        self.held_ns = 0
        self._piece: int | None = None  # the piece whose first audio the LLM waits for
        self._released: anyio.Event | None = None
        self._voiced_s = 0.0  # audio the engine has made this turn
        self._first_audio_ns: int | None = None  # when its first audio came

    def audio_ahead_s(self, now_ns: int) -> float:
        """Audio made but not yet played, were playback to start at the first audio
        and never stop (0 before any audio)."""
        if self._first_audio_ns is None:
            return 0.0
        return max(0.0, self._voiced_s - (now_ns - self._first_audio_ns) / 1e9)

    def piece_pushed(self, index: int, now_ns: int | None = None) -> None:
        """Piece ``index`` was handed to the engine: hold the LLM for its first
        audio if it is the first piece, or if the audio ahead is short."""
        if not self.enabled or self._piece is not None:
            return
        now = time.perf_counter_ns() if now_ns is None else now_ns
        if index == 0 or self.audio_ahead_s(now) < self.ahead_s:
            self._piece = index
            self._released = anyio.Event()
            self.holds += 1

    def audio(self, piece: int, seconds: float, now_ns: int | None = None) -> None:
        """The engine returned ``seconds`` of audio for ``piece``."""
        now = time.perf_counter_ns() if now_ns is None else now_ns
        if self._first_audio_ns is None:
            self._first_audio_ns = now
        self._voiced_s += seconds

    def played(self, piece: int) -> None:
        """The sink took the first audio of ``piece``: the LLM may go on if it was
        held for this piece or an earlier one (that one made no audio)."""
        if self._piece is not None and piece >= self._piece:
            self.release()

    def release(self) -> None:
        """Let the LLM go on (the piece's audio was played, or no more is coming)."""
        self._piece = None
        if self._released is not None:
            self._released.set()
            self._released = None

    @property
    def holding(self) -> bool:
        return self._released is not None

    async def llm_may_go_on(self) -> None:
        """Return at once unless the LLM is held; then when it is released (or
        after ``max_hold_s``)."""
        released = self._released
        if released is None:
            return
        started = time.perf_counter_ns()
        with anyio.move_on_after(self.max_hold_s):
            await released.wait()
        self.held_ns += time.perf_counter_ns() - started
        if self._released is released:  # timed out: the engine is not making audio
            self.release()


@dataclass(frozen=True, slots=True)
class ThreadBudget:
    llm: int  # the embedded model's threads (llama.cpp)
    tts: int  # a local neural voice's compute threads (onnxruntime intra-op)


def thread_budget(settings: SchedulingConfig, cpus: int | None = None) -> ThreadBudget:
    """The threads of both local engines, chosen together for ``cpus`` cores (the
    settings' own where given): each gets every core. With first-audio priority
    the two rarely compute at the same moment, and when they do (a later piece),
    the voice is ahead of playback; fewer threads each made first audio slower in
    the benchmark (docs/benchmarks.md, "what moves first-audio latency")."""
    n = default_n_threads() if cpus is None else cpus
    return ThreadBudget(
        llm=settings.llm_threads if settings.llm_threads is not None else n,
        tts=settings.tts_threads if settings.tts_threads is not None else n,
    )

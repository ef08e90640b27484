"""The interface every TTS engine implements: a turn's speech as one stream.

A turn opens one ``TtsStream``, pushes the text pieces the chunker releases,
marks the end of its input, and reads the audio back in text order, each chunk
tagged with the piece it voices and, where the service says, which characters
it voices when (``Alignment``). A streaming service (the ElevenLabs socket) is
fed continuously and keeps its prosody across pieces; an engine that speaks one
piece at a time (Piper, espeak-ng, HTTP services) is adapted to the same stream
in one place (``piece_stream.PieceEngine``), so the pipeline has one path.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol, Self

from ..vocab.audio import AudioChunk


class TtsError(RuntimeError):
    """The engine could not speak: missing program, model or key, a service error,
    crashed process, bad output. ``retryable`` errors (429, 5xx, a refused or
    dropped connection) may succeed if tried again, after ``retry_after_s`` when
    the service said how long to wait. ``kind`` sorts it for metrics: a
    service's as the LLM errors are (``rate_limit``, ``overloaded``, ``server``, ``connection``,
    ``timeout``, ``auth``, ``bad_request``, ``stream``), else ``engine`` (a local
    engine's failure), or ``connection`` for an unsorted retryable one."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        retry_after_s: float | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.kind = kind or ("connection" if retryable else "engine")


@dataclass(frozen=True, slots=True)
class Alignment:
    """Which characters a chunk of audio voices, and when: ``chars[i]`` starts
    ``start_ms[i]`` after the start of the chunk it comes with and lasts
    ``duration_ms[i]``. The characters are those of the text sent (not the
    service's normalised spelling), so what was heard can be told to the
    character."""

    chars: tuple[str, ...]
    start_ms: tuple[float, ...]
    duration_ms: tuple[float, ...]

    def __post_init__(self) -> None:
        if not len(self.chars) == len(self.start_ms) == len(self.duration_ms):
            raise ValueError("alignment: chars, start times and durations differ in length")


@dataclass(frozen=True, slots=True)
class Voiced:
    """Audio of piece number ``piece`` (0-based, in the order pieces were pushed),
    received from the engine at ``t_ns`` (``time.perf_counter_ns()``)."""

    piece: int
    audio: AudioChunk
    alignment: Alignment | None = None
    t_ns: int = field(default_factory=time.perf_counter_ns)


@dataclass(slots=True)
class StreamStats:
    """What a turn's stream cost, filled in by the engine as it goes."""

    reused_connection: bool = False  # spoke over a connection an earlier turn opened
    reconnects: int = 0  # connections re-opened after a drop mid-turn
    cancelled_requests: int = 0  # requests or contexts cut off before their end
    chars_billed: int = 0  # characters sent to a paid service (0 for local engines)
    busy_ns: int = 0  # time spent producing audio, for the real-time factor (0: unknown)


class TtsStream(Protocol):
    """One turn's speech. Use as ``async with engine.open_stream() as stream:``;
    one task pushes pieces and then calls ``end_input()``, another iterates the
    audio, which ends once every pushed piece is voiced. Leaving the block
    before that (an interruption cancels the turn) stops the service at once:
    the socket is closed or the requests are cancelled, and no task, socket or
    process is left behind. An error is raised from the iteration, after the
    audio that came before it."""

    stats: StreamStats

    async def push(self, text: str) -> None:
        """Send the next piece's text (it may wait: backpressure)."""
        ...

    async def end_input(self) -> None:
        """No more text this turn."""
        ...

    def __aiter__(self) -> AsyncIterator[Voiced]: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class AsyncIteratorOfVoiced(Protocol):
    def __aiter__(self) -> AsyncIterator[Voiced]: ...

    async def __anext__(self) -> Voiced: ...


class TtsEngine(Protocol):
    """A voice: ``await engine.start()`` once per session (loads the model, checks
    the key and voice; slow engines pay their load time here, not per turn),
    then one ``open_stream()`` per turn, one turn at a time, then
    ``await engine.aclose()``.

    ``sample_rate`` is the rate of the audio it yields (known after ``start``);
    ``local``: it computes on this machine (it competes with an embedded LLM for
    the CPU); cloud engines wait on a service."""

    name: str
    sample_rate: int
    local: bool

    async def start(self) -> None: ...

    def open_stream(self) -> TtsStream: ...

    async def aclose(self) -> None: ...

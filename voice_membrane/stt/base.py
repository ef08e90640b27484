"""The interface every speech-to-text engine implements: an utterance in, its
transcripts out, as one stream.

A listening session opens one ``SttStream`` per utterance (from the voice
activity detector's speech start, pre-roll included), pushes the audio as it
comes (mono int16 at the engine's ``sample_rate``; the caller resamples), calls
``finalize()`` when the detector says the speech stopped (``speech_paused``
hints before that, when the silence began), and reads transcripts
back: partials while the user speaks, then finals. ``finalize()`` asks the
engine to settle what it has (Deepgram's ``Finalize``, a local decoder's end of
utterance); the reader then gets the remaining finals and the iteration ends.
An engine that hears nothing ends with no final at all (not an error).

Times in transcripts are seconds of pushed audio (``vocab.transcripts``), so a
stream fed from a file faster than real time behaves exactly as a live one.

Errors are ``SttError``: ``retryable`` ones (a refused or dropped connection,
429, 5xx) may be retried by the caller — only before the first transcript, so a
turn never starts from half an utterance heard twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Protocol, Self

from ..vocab.audio import Samples
from ..vocab.transcripts import Transcript


class SttError(RuntimeError):
    """The engine could not transcribe: missing model or key, a service error, a
    dropped connection, a malformed message. ``retryable`` errors may succeed if
    tried again, after ``retry_after_s`` when the service said how long."""

    def __init__(
        self, message: str, *, retryable: bool = False, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class SttStream(Protocol):
    """One utterance's transcription. Use as an async context manager (closing
    it releases the connection or decoder, also when abandoned midway)."""

    async def push(self, samples: Samples) -> None:
        """Audio of the utterance, in order, at the engine's ``sample_rate``."""
        ...

    async def finalize(self) -> None:
        """No more audio: settle the transcript. Idempotent."""
        ...

    async def speech_paused(self, paused: bool) -> None:
        """A hint from the detector: the user stopped (``True``: the silence
        began; ``finalize()`` follows if it lasts) or went on (``False``). An
        engine may start settling the audio so far on a pause, so the final is
        ready sooner; every other engine ignores it (a no-op is correct; a
        stream without the method is never told)."""
        ...

    def transcripts(self) -> AsyncIterator[Transcript]:
        """Partials and finals as the engine produces them; ends after the last
        final once ``finalize()`` was called (or raises ``SttError``)."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


# The spec a listening pipeline uses when it names none: the embedded whisper
# tiny.en (stt/registry.py). Here, not there, so that reading a pipeline file
# does not import the registry.
DEFAULT_SPEC = "whisper"


class SttEngine(Protocol):
    """A speech-to-text engine, opened once per session (models load here)."""

    name: str  # e.g. "pocketsphinx", "deepgram:nova-3", "openai:gpt-4o-mini-transcribe"
    sample_rate: int  # what ``push`` takes: 16000, or 8000 for a local engine opened for a call
    local: bool  # computes on this machine (competes for the CPU with the LLM and TTS)

    async def start(self) -> None:
        """Load models / check keys; ``SttError`` (one line) when it cannot."""
        ...

    def stream(self) -> SttStream:
        """A new utterance's stream."""
        ...

    async def aclose(self) -> None: ...


async def tell_paused(stream: SttStream, paused: bool) -> None:
    """``stream.speech_paused(paused)``, if it has one (it is optional: an engine
    written before the hint existed has none, and is never told)."""
    hint = getattr(stream, "speech_paused", None)
    if hint is not None:
        await hint(paused)

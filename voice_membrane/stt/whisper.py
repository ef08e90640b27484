"""whisper: a local CTranslate2 Whisper model (``whisper:PATH``) over faster-whisper.

Far more accurate than pocketsphinx on open speech (docs/stt.md), but not a
streaming recognizer: it hears a whole stretch of audio at once. So a stream
keeps the utterance's audio, and:

- the final is one decode of the whole utterance, with word times and the
  hallucination guard of ``whisper_decoding``. It starts at the detector's
  pause (``speech_paused(True)``: the silence began, ``min_silence_s`` before
  ``finalize()``), so it is mostly done when the stop is confirmed; if speech
  came again (``speech_paused(False)``) that decode is dropped and the next
  pause, or ``finalize()``, starts another. ``finalize()`` returns at once;
  the final comes through ``transcripts()``;
- partials (``partial_interval_s``, default 0.5 s; None for none) decode the
  audio so far, cut at a whole multiple of the interval, each time that much
  more audio arrived *and the worker is idle* — never two decodes at once, never
  a queue: on a busy CPU partials are fewer, not late. They are the cheap
  decode (a short encoder window, ``whisper_decoding``): a partial running when
  a pause begins holds the final's decode up briefly, and none starts during a
  pause. In barge-in the
  detector's windows pause the assistant; the words that decide whether it
  resumes or stops come from the final (a real partial only pauses it sooner
  in the echo warm-up). Not beyond the first 30 s window (each would cost a window more).

Threads: each engine has one worker thread that loads the model and runs every
decode, its streams' in order; ``cpu_threads`` (default 2) are CTranslate2's
threads inside a decode. Engines with the same folder and threads share one
loaded model per process, whose decodes take turns (``whisper_models``).

``sample_rate``: 16000, or 8000 for telephone audio: whisper hears 16 kHz, so an
8 kHz utterance is upsampled band-limited (``vocab.upsample``) before each
decode. Linear interpolation leaves mirror images at 4-8 kHz that whisper hears:
on the phone fixtures tiny.en made 9 word errors of 61 from linearly upsampled
audio, 5 from band-limited (docs/stt.md).

``phrases`` (names, terms, expected questions) go to faster-whisper's
``hotwords``, as one sentence: they are put before every 30 s window as text
"heard before", which biases whisper towards their words and spelling.
``initial_prompt`` is the same prompt for the first window only (identical on an
utterance under 30 s, which is nearly all of them); ``hotwords`` keeps the bias
on longer ones. Unlike pocketsphinx's grammar they do not close the vocabulary.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

import numpy as np

from ..vocab.audio import Samples
from ..vocab.transcripts import Transcript
from ..vocab.upsample import upsample
from . import whisper_models
from ._results import END, Results, call_in_loop
from .base import SttError
from .whisper_decoding import FINAL_WINDOW_S, RATE, WINDOW_S, DecodeOptions, decode

T = TypeVar("T")

SAMPLE_RATES = (8000, RATE)  # what ``push`` may take


class WhisperStt:
    """The local whisper ``SttEngine``: ``start()`` loads the model from
    ``model_path`` (a CTranslate2 Whisper folder); ``stream()`` opens an utterance."""

    sample_rate: int  # of the pushed audio (the model hears 16 kHz)
    local = True

    def __init__(
        self,
        model_path: str,
        *,
        language: str = "en",
        beam_size: int = 1,
        cpu_threads: int = 2,
        phrases: Sequence[str] | None = None,
        partial_interval_s: float | None = 0.5,
        no_speech_threshold: float = 0.6,
        log_prob_threshold: float = -1.0,
        compression_ratio_threshold: float = 2.4,
        sample_rate: int = RATE,
        final_window_s: float = FINAL_WINDOW_S,
    ) -> None:
        if sample_rate not in SAMPLE_RATES:
            raise ValueError(f"whisper takes 8000 or 16000 Hz audio, not {sample_rate}")
        self.sample_rate = sample_rate
        if beam_size < 1 or cpu_threads < 1:
            raise ValueError("beam_size and cpu_threads must be at least 1")
        if not 1.0 <= final_window_s <= WINDOW_S:
            raise ValueError(f"final_window_s must be 1 to {WINDOW_S:g} (whisper's window)")
        if partial_interval_s is not None and partial_interval_s <= 0:
            raise ValueError("partial_interval_s must be positive (or None: no partials)")
        if isinstance(phrases, str):
            phrases = [phrases]  # one phrase, not its characters
        self.model_path = str(model_path)
        self.name = f"whisper:{self.model_path}"
        self.cpu_threads = cpu_threads
        self.phrases = tuple(p.strip() for p in phrases if p.strip()) if phrases else ()
        self.options = DecodeOptions(
            language=language,
            beam_size=beam_size,
            hotwords=_prompt(self.phrases),
            no_speech_threshold=no_speech_threshold,
            log_prob_threshold=log_prob_threshold,
            compression_ratio_threshold=compression_ratio_threshold,
            final_window_s=final_window_s,
        )
        self.partial_block = (
            None if partial_interval_s is None else round(partial_interval_s * sample_rate)
        )
        self._executor: ThreadPoolExecutor | None = None
        self._model: Any = None  # touched on the worker thread only

    async def start(self) -> None:
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="whisper")
        try:
            await self.run(self._load)
        except BaseException:
            await self.aclose()
            raise

    def stream(self) -> WhisperStream:
        if self._executor is None:
            raise SttError("whisper: stream() before start() or after close")
        return WhisperStream(self)

    async def aclose(self) -> None:
        """Let the thread finish what it was given, drop the model and end it."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.submit(self._unload)
            executor.shutdown(wait=False, cancel_futures=False)

    def submit(self, func: Callable[[], T]) -> Future[T]:
        if self._executor is None:
            raise SttError("whisper: the engine is closed")
        return self._executor.submit(func)

    async def run(self, func: Callable[[], T]) -> T:
        return await asyncio.wrap_future(self.submit(func))

    def decode(
        self, samples: Samples, *, final: bool, stale: Callable[[], bool] = lambda: False
    ) -> Transcript | None:
        """(worker thread) ``stale``: see ``whisper_decoding.decode``."""
        if self._model is None:
            raise SttError("whisper: the engine is closed")
        audio = upsample(samples, RATE // self.sample_rate)
        return decode(self._model, audio, self.options, final=final, stale=stale)

    def _load(self) -> None:
        # One model per process for every engine with this folder and threads (a
        # served session's engine shares the others'): whisper_models.py.
        self._model = whisper_models.acquire(
            self.model_path, self.cpu_threads, self.options.language
        )

    def _unload(self) -> None:
        if self._model is not None:
            self._model = None
            whisper_models.release(self.model_path, self.cpu_threads)


def _prompt(phrases: tuple[str, ...]) -> str | None:
    """The phrases as one finished sentence: whisper continues an unfinished
    prompt ("the moon" made "how far is the moon" "half are the moon"); with the
    full stop it hears the question and spells "moon" as asked."""
    if not phrases:
        return None
    text = ", ".join(phrases)
    return text if text[-1] in ".?!" else text + "."


@dataclass(eq=False, slots=True)
class _Settle:
    """The final-quality decode started at a pause, of the first ``upto`` samples."""

    upto: int
    done: bool = False
    final: Transcript | None = None


class WhisperStream:
    """One utterance on a ``WhisperStt`` (see ``SttStream`` and the module)."""

    def __init__(self, engine: WhisperStt) -> None:
        self._engine = engine
        self._loop = asyncio.get_running_loop()
        self._chunks: list[Samples] = []
        self._pushed = 0  # samples
        self._next_partial = engine.partial_block
        self._busy = 0  # this stream's decodes given to the worker and not done
        self._settle: _Settle | None = None  # since the pause the user is in
        self._results = Results()
        self._finalized = False
        self._closed = False

    async def push(self, samples: Samples) -> None:
        if self._results.error is not None:
            raise self._results.error
        if self._finalized or self._closed:
            raise SttError("whisper: push() after finalize() or close")
        if len(samples) == 0:
            return
        self._chunks.append(samples.astype(np.int16, copy=True))
        self._pushed += len(samples)
        block, due = self._engine.partial_block, self._next_partial
        if block is None or due is None or self._pushed < due:
            return
        if self._busy or self._settle is not None:
            return  # never a queue; in a pause the settling decode has the worker
        cut = self._pushed - self._pushed % block  # the last whole interval
        self._next_partial = cut + block
        if cut > WINDOW_S * self._engine.sample_rate:
            self._next_partial = None  # see the module: partials stop at 30 s
            return
        audio = self._audio()[:cut]
        self._submit(lambda: self._partial(audio))

    async def speech_paused(self, paused: bool) -> None:
        """A pause: decode the audio so far for the final now (``finalize()``
        takes it if the user does not go on). Speech again: that decode is
        stale (if it has not started, it never does)."""
        if self._finalized or self._closed:
            return
        if not paused:
            self._settle = None
            return
        if self._pushed == 0 or (self._settle is not None and self._settle.upto == self._pushed):
            return
        settle = self._settle = _Settle(self._pushed)
        audio = self._audio()
        self._submit(lambda: self._settle_decode(settle, audio))

    async def finalize(self) -> None:
        """Settle: the final comes via ``transcripts()`` (this returns at once).
        The pause's decode is the final if no speech came since; else one
        decode of the whole utterance starts now."""
        if self._finalized or self._closed:
            return
        self._finalized = True
        if self._pushed == 0:
            self._deliver([END])
            return
        settle = self._settle
        if settle is not None:
            if settle.done:
                self._deliver([settle.final, END] if settle.final is not None else [END])
            return  # else it is delivered when it is done
        audio = self._audio()
        self._submit(lambda: self._final(audio))

    def transcripts(self) -> AsyncIterator[Transcript]:
        return self._results.read()

    async def aclose(self) -> None:
        """Abandon the utterance: decodes not started yet are skipped."""
        if self._closed:
            return
        self._closed = True
        self._chunks = []
        self._deliver([END])

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _audio(self) -> Samples:
        if len(self._chunks) > 1:
            self._chunks = [np.concatenate(self._chunks)]
        return self._chunks[0]

    def _submit(self, work: Callable[[], None]) -> None:
        try:
            self._engine.submit(work)
        except SttError as exc:
            self._results.fail(exc)
            return
        self._busy += 1

    # The worker thread's side: each decode posts once, done, whatever happened.

    def _skip(self) -> bool:
        return self._closed or self._results.error is not None

    def _decode(
        self, audio: Samples, *, final: bool, stale: Callable[[], bool] = lambda: False
    ) -> tuple[Transcript | None, SttError | None]:
        try:
            return self._engine.decode(audio, final=final, stale=stale), None
        except SttError as exc:
            return None, exc
        except Exception as exc:  # (anything else must still post, or the stream waits forever)
            return None, SttError(f"whisper: decoding failed: {type(exc).__name__}: {exc}")

    def _partial(self, audio: Samples) -> None:
        partial = error = None
        # (a pause since it was given: the settling decode goes first)
        if not (self._skip() or self._finalized or self._settle is not None):
            partial, error = self._decode(audio, final=False)
        self._post([partial] if partial is not None else None, error)

    def _settle_decode(self, settle: _Settle, audio: Samples) -> None:
        final = error = None
        if not self._skip() and settle is self._settle:  # (else speech resumed)
            final, error = self._decode(
                audio, final=True, stale=lambda: self._skip() or settle is not self._settle
            )
        call_in_loop(self._loop, self._settled, settle, final, error)

    def _final(self, audio: Samples) -> None:
        final = error = None
        if not self._skip():
            final, error = self._decode(audio, final=True)
        self._post([final, END] if final is not None else [END], error)

    def _post(self, items: list[Transcript | None] | None, error: SttError | None) -> None:
        call_in_loop(self._loop, self._arrive, items, error)

    # The loop's side.

    def _arrive(self, items: list[Transcript | None] | None, error: SttError | None) -> None:
        self._busy -= 1
        if error is not None:
            self._results.fail(error)
        elif items:
            self._deliver(items)

    def _settled(self, settle: _Settle, final: Transcript | None, error: SttError | None) -> None:
        self._busy -= 1
        settle.done, settle.final = True, final
        if error is not None:
            self._results.fail(error)
        elif self._finalized and settle is self._settle:
            self._deliver([final, END] if final is not None else [END])

    def _deliver(self, items: list[Transcript | None]) -> None:
        if self._finalized and items and items[0] is not None and not items[0].final:
            return  # a partial that finished after finalize(): the final supersedes it
        self._results.deliver(items)

"""pocketsphinx: the embedded recognizer, no key and no download (the wheel ships
a US-English acoustic model, the CMU dictionary and a language model).

Threads: every decoder call of an engine runs on one dedicated worker thread
(decoding ~0.1x real time with the language model must not hold the event
loop); its streams share it in order. Decoders are kept in a small pool: a
stream takes one at its first push and gives it back when it ends, so
back-to-back utterances reuse a loaded decoder (~0.3 s to load) and two
overlapping ones (a barge-in while the last is settling) each have their own.

``push`` hands the audio to the thread and returns; it waits only when more
than ``max_backlog_s`` of pushed audio is not decoded yet, so a busy CPU slows
the caller instead of growing a queue. Transcripts come back to the loop
through ``call_soon_threadsafe``.

``sample_rate``: 16000, or 8000 for telephone audio (the listener then runs at
the call's own rate). The model is a 16 kHz one: 8 kHz pushes are upsampled
linearly on the way in. Deliberately linear: its faint mirror images above
4 kHz are closer to what the model's upper filters expect than a clean
band-limited signal or decoding at 8 kHz with narrowed filters (word error rate
on the phone fixtures: linear 0.51, windowed-sinc 0.59, native 8 kHz 0.74-0.90;
docs/stt.md).

``phrases``: the recognizer then hears only those phrases (a JSGF grammar),
as a command or short-question vocabulary: much more accurate on them (see
docs/stt.md) and ~10x cheaper, but speech outside the list is either nothing
or the nearest phrase. Another language: its ``acoustic_model`` folder,
``dictionary`` and ``language_model``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Self, TypeVar

from ..listening.resample import StreamResampler
from ..vocab.audio import Samples
from ..vocab.transcripts import Transcript
from ._results import END, Results, call_in_loop
from .base import SttError
from .sphinx_decoding import (
    RATE,
    Utterance,
    decoder_config,
    load_decoder,
    phrase_grammar,
    unknown_words,
    use_grammar,
)

T = TypeVar("T")

SAMPLE_RATES = (8000, RATE)  # what ``push`` may take


class PocketsphinxStt:
    """The embedded ``SttEngine``: ``start()`` loads one decoder (and checks the
    paths, the grammar and its words); ``stream()`` opens an utterance."""

    name = "pocketsphinx"
    sample_rate: int  # of the pushed audio (the model hears 16 kHz)
    local = True

    def __init__(
        self,
        *,
        phrases: Sequence[str] | None = None,
        acoustic_model: str | None = None,
        dictionary: str | None = None,
        language_model: str | None = None,
        partial_interval_s: float = 0.1,
        max_backlog_s: float = 1.0,
        adapt: bool = True,
        sample_rate: int = RATE,
    ) -> None:
        if partial_interval_s <= 0 or max_backlog_s <= 0:
            raise ValueError("partial_interval_s and max_backlog_s must be positive")
        if sample_rate not in SAMPLE_RATES:
            raise ValueError(f"pocketsphinx takes 8000 or 16000 Hz audio, not {sample_rate}")
        self.sample_rate = sample_rate
        if isinstance(phrases, str):
            phrases = [phrases]  # one phrase, not its characters
        self.phrases = tuple(phrases) if phrases is not None else None
        self._paths = (acoustic_model, dictionary, language_model)
        self.block = max(1, round(partial_interval_s * RATE))
        self.max_backlog = max(1, round(max_backlog_s * sample_rate))  # pushed samples
        self._executor: ThreadPoolExecutor | None = None
        self._config: dict[str, Any] = {}
        self._grammar: str | None = None
        self._phrase_set: frozenset[str] | None = None
        # The cepstral mean each utterance starts from: the model's before any
        # audio, then (``adapt``) the one the last heard utterance ended with — the
        # voice and the room, learnt as a live decoder does. A fresh start for
        # every utterance made the word error rate on the shipped questions more
        # than double (docs/stt.md); either way the same sequence of utterances
        # gives the same words however each is chunked.
        self._initial_cmn = ""
        self.adapt = adapt
        self._free: list[Any] = []  # idle decoders (touched on the worker thread only)

    async def start(self) -> None:
        if self._executor is not None:
            return
        if importlib.util.find_spec("pocketsphinx") is None:
            raise SttError("pocketsphinx is not installed: pip install pocketsphinx")
        self._config = decoder_config(*self._paths)
        if self.phrases is not None:
            self._grammar, self._phrase_set = phrase_grammar(self.phrases)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pocketsphinx")
        try:
            await self.run(self._load_first)
        except BaseException:
            await self.aclose()
            raise

    def stream(self) -> PocketsphinxStream:
        if self._executor is None:
            raise SttError("pocketsphinx: stream() before start()")
        return PocketsphinxStream(self)

    async def aclose(self) -> None:
        """Let the thread finish what it was given, drop the decoders and end it."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.submit(self._free.clear)
            executor.shutdown(wait=False, cancel_futures=False)

    def submit(self, func: Callable[[], T]) -> Future[T]:
        if self._executor is None:
            raise SttError("pocketsphinx: the engine is closed")
        return self._executor.submit(func)

    async def run(self, func: Callable[[], T]) -> T:
        # The asyncio backend, as local_llama's ModelThread: a concurrent future is
        # awaited without occupying a second thread.
        return await asyncio.wrap_future(self.submit(func))

    def take_decoder(self) -> Any:
        """A pooled decoder, or a new one (worker thread)."""
        return self._free.pop() if self._free else load_decoder(self._config, self._grammar)

    def learn_cmn(self, cmn: str) -> None:
        """Start the next utterances from this normalisation (worker thread)."""
        self._initial_cmn = cmn

    def give_back(self, decoder: Any) -> None:
        self._free.append(decoder)

    def utterance(self) -> Utterance:
        return Utterance(self.take_decoder(), self.block, self._phrase_set, self._initial_cmn)

    def _load_first(self) -> None:
        decoder = load_decoder(self._config, None)
        if self._phrase_set is not None and self._grammar is not None:
            missing = unknown_words(decoder, self._phrase_set)
            if missing:
                raise SttError(
                    f"pocketsphinx: phrases use words not in the dictionary: {', '.join(missing)}"
                )
            use_grammar(decoder, self._grammar)
        self._initial_cmn = decoder.get_cmn()
        self._free.append(decoder)


class PocketsphinxStream:
    """One utterance on a ``PocketsphinxStt`` (see ``SttStream``)."""

    def __init__(self, engine: PocketsphinxStt) -> None:
        self._engine = engine
        self._loop = asyncio.get_running_loop()
        self._utterance: Utterance | None = None
        self._pending: deque[tuple[Future[None], int]] = deque()
        self._backlog = 0  # samples pushed, not yet decoded
        self._results = Results()
        self._finalized = False
        self._closed = False
        # The model's rate from the caller's: the same output however pushes are cut.
        self._upsampler = StreamResampler(engine.sample_rate, RATE)

    async def push(self, samples: Samples) -> None:
        if self._results.error is not None:
            raise self._results.error
        if self._finalized or self._closed:
            raise SttError("pocketsphinx: push() after finalize() or close")
        if len(samples) == 0:
            return
        data = self._upsampler.feed(samples).astype("<i2", copy=False).tobytes()
        future = self._engine.submit(lambda: self._process(data))
        self._pending.append((future, len(samples)))
        self._backlog += len(samples)
        while self._backlog > self._engine.max_backlog:
            oldest, count = self._pending.popleft()
            self._backlog -= count
            await asyncio.wrap_future(oldest)
        while self._pending and self._pending[0][0].done():
            self._backlog -= self._pending.popleft()[1]

    async def speech_paused(self, paused: bool) -> None:
        """Ignored: it decodes as audio comes, so the final has only the tail left."""

    async def finalize(self) -> None:
        if self._finalized or self._closed:
            return
        self._finalized = True
        self._pending.clear()  # the thread runs them in order before the end
        await asyncio.wrap_future(self._engine.submit(self._finish))

    def transcripts(self) -> AsyncIterator[Transcript]:
        return self._results.read()

    async def aclose(self) -> None:
        """Abandon the utterance (if not finalized) and give its decoder back."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(SttError):  # a closed engine's thread drops them itself
            self._engine.submit(self._release)
        self._results.deliver([END])

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # The worker thread's side.

    def _process(self, data: bytes) -> None:
        if self._closed or self._results.error is not None:
            return
        try:
            if self._utterance is None:
                self._utterance = self._engine.utterance()
            partials = self._utterance.process(data)
        except SttError as exc:
            self._fail(exc)
            return
        except (RuntimeError, ValueError) as exc:
            self._fail(SttError(f"pocketsphinx: decoding failed: {exc}"))
            return
        if partials:
            self._post(list(partials))

    def _finish(self) -> None:
        if self._closed or self._results.error is not None:
            return
        final: Transcript | None = None
        try:
            if self._utterance is not None:
                final = self._utterance.finish()
        except (RuntimeError, ValueError) as exc:
            self._fail(SttError(f"pocketsphinx: decoding failed: {exc}"))
            return
        if final is not None and self._engine.adapt and self._utterance is not None:
            self._engine.learn_cmn(self._utterance.decoder.get_cmn())
        self._release()
        self._post([final, END] if final is not None else [END])

    def _release(self) -> None:
        utterance, self._utterance = self._utterance, None
        if utterance is not None:
            utterance.abandon()
            self._engine.give_back(utterance.decoder)

    def _fail(self, error: SttError) -> None:
        self._release()
        call_in_loop(self._loop, self._results.fail, error)

    def _post(self, items: list[Transcript | None]) -> None:
        call_in_loop(self._loop, self._results.deliver, items)

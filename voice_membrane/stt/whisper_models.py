"""One loaded whisper model per process, shared by every engine that opens the
same folder with the same threads (``serve`` opens an engine per session).

``acquire`` (on an engine's worker thread, at ``start()``) loads the model the
first time and counts its users; ``release`` (at ``aclose()``) drops it with
the last one. A second engine starting while the first loads waits for that
load rather than making its own: 20 sessions hold one copy of tiny.en, not 20.

Decodes from many sessions take turns (``Turns``): one at a time per model,
for the whole decode (faster-whisper decodes lazily, as its segments are read:
the wrapper reads them all in its turn), finals before partials (a final is
what a user waits on; a partial only shows words sooner), each kind in the
order it came. Running them at once instead (CTranslate2 interleaving them, or
replicas: ``num_workers``) costs the same CPU per decode (0.9 s for a 2.4 s
question) and, on cores the process has to itself, makes every final wait for
all of them (docs/stt.md, "Many sessions").
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .whisper_decoding import check_language, load_model

_Key = tuple[str, int]  # the folder's real path, CTranslate2's threads per decode


class Turns:
    """One holder at a time; of those waiting, finals first, then in arrival order."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._busy = False
        self._waiting: list[tuple[int, int]] = []  # a heap of (0 final / 1 partial, ticket)
        self._tickets = itertools.count()

    @contextmanager
    def turn(self, *, final: bool) -> Iterator[None]:
        me = (0 if final else 1, next(self._tickets))
        with self._changed:
            heapq.heappush(self._waiting, me)
            while self._busy or self._waiting[0] != me:
                self._changed.wait()
            heapq.heappop(self._waiting)
            self._busy = True
        try:
            yield
        finally:
            with self._changed:
                self._busy = False
                self._changed.notify_all()

    def waiting(self) -> int:
        with self._changed:
            return len(self._waiting)


class SharedModel:
    """A loaded ``faster_whisper.WhisperModel`` whose decodes take ``Turns``."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.turns = Turns()
        self.users = 0  # engines holding it (guarded by the cache's lock)

    @property
    def supported_languages(self) -> list[str]:
        return list(self._model.supported_languages)

    def transcribe(self, audio: Any, **options: Any) -> tuple[list[Any], Any]:
        """``WhisperModel.transcribe``, its segments read now, in its turn (a
        final's decode is the one with word times: ``whisper_decoding.decode``)."""
        with self.turns.turn(final=bool(options.get("word_timestamps"))):
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

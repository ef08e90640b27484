"""Trimming llama.cpp's KV cache in place, so a trimmed conversation is not read again.

When a long session drops its oldest turns (``pipeline/history.py``), the new prompt
is the cached one with a span cut out after the kept start (the system prompt and
the first header tokens): ``new = old[:p0] + old[p1:q] + appended``. llama.cpp's
own reuse covers only a common prefix, so it would evaluate everything after
``p0`` again (seconds on a small CPU). Here the span ``[p0, p1)`` is removed from
the KV cache, the positions of ``[p1, q)`` are shifted down by ``p1 - p0`` (RoPE is
re-applied by llama.cpp at the next decode), what follows ``q`` is removed, and
llama-cpp-python's record of the cache (``input_ids``, ``n_tokens``) is rewritten to
match; its prefix reuse then evaluates only ``appended``.

The kept tokens are the same tokens, but their cached keys and values were computed
while the dropped turns were still in front of them (what llama.cpp's own
"context shift" does too): a greedy reply may differ from a full re-read's. The
decision is made on tokens, never assumed: ``find_removed_span`` checks equality,
and llama-cpp-python's prefix check runs again on the rewritten record.

Written against llama-cpp-python 0.3.36 (llama.cpp's ``llama_memory_*`` API). It
reaches into ``Llama``'s private attributes; if any is missing (another version),
or the model's cache cannot shift (recurrent or hybrid models), or llama.cpp
refuses a removal, nothing is trimmed in place and the prompt is read again, as
before. This module is the only one that touches those internals.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

WRITTEN_FOR = "0.3.36"
# Below this many reusable tokens a re-read is short anyway (a few hundred ms on a
# small CPU) and an accidental short match is not worth a shift.
MIN_KEPT = 64
_SEQ = 0  # llama-cpp-python puts every token in sequence 0
_ATTRIBUTES = ("_ctx", "input_ids", "n_tokens", "scores", "_logits_all", "_requires_eval")


@dataclass(frozen=True)
class Span:
    """``old[start:end]`` is removed; ``old[end:end + kept]`` equals ``new[start:start + kept]``."""

    start: int
    end: int
    kept: int


@dataclass(frozen=True)
class TrimResult:
    """What a call to ``trim_in_place`` did: ``span`` is None when nothing was trimmed,
    and ``reason`` says why (``"trimmed"`` when it was)."""

    span: Span | None
    reason: str


def common_prefix(a: npt.NDArray[np.intc], b: npt.NDArray[np.intc]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def find_removed_span(old: Any, new: Any, min_kept: int = MIN_KEPT) -> Span | None:
    """The span to cut from ``old`` so that the longest run of it lines up with ``new``.

    ``start`` is where ``old`` and ``new`` first differ (at least one token shared);
    ``end`` is the position in ``old`` after ``start`` from which the most tokens
    match ``new`` from ``start`` on. None when ``new`` continues ``old`` (or is a
    prefix of it), shares nothing at the start, or fewer than ``min_kept`` tokens
    would be kept after the span."""
    a = np.asarray(old, dtype=np.intc)
    b = np.asarray(new, dtype=np.intc)
    start = common_prefix(a, b)
    if start == 0 or start >= len(a) or start >= len(b):
        return None
    room = len(b) - start  # at most this many tokens can line up
    best: Span | None = None
    # Only positions holding new[start] can begin a match; numpy compares each run.
    for at in np.flatnonzero(a[start + 1 :] == b[start]):
        end = int(at) + start + 1
        if best is not None and len(a) - end <= best.kept:
            break  # no later start can keep more
        kept = common_prefix(a[end : end + room], b[start:])
        if best is None or kept > best.kept:
            best = Span(start, end, kept)
    if best is None or best.kept < min(min_kept, room) or best.kept < 1:
        return None
    return best


def _supported(llama: Any) -> str | None:
    """Why this ``Llama`` cannot be trimmed in place, or None when it can."""
    if not all(hasattr(llama, name) for name in _ATTRIBUTES):
        return "unsupported llama-cpp-python"
    if getattr(llama, "_is_recurrent", False) or getattr(llama, "_is_hybrid", False):
        return "recurrent model"
    if getattr(llama, "draft_model", None) is not None:
        return "draft model"
    memory = getattr(llama._ctx, "memory", None)
    low = importlib.import_module("llama_cpp")
    needed = ("llama_memory_can_shift", "llama_memory_seq_rm", "llama_memory_seq_add")
    if memory is None or not all(hasattr(low, name) for name in needed):
        return "unsupported llama-cpp-python"
    if not low.llama_memory_can_shift(memory):
        return "cache cannot shift"
    return None


def trim_in_place(llama: Any, new_tokens: list[int], min_kept: int = MIN_KEPT) -> TrimResult:
    """Cut the span that ``new_tokens`` no longer holds out of ``llama``'s KV cache and
    its record of it, so that its prefix reuse evaluates only what follows. Blocking:
    call it on the model's thread, holding the model's lock."""
    why = _supported(llama)
    if why is not None:
        return TrimResult(None, why)
    cached = int(llama.n_tokens)
    span = find_removed_span(llama.input_ids[:cached], new_tokens, min_kept)
    if span is None:
        return TrimResult(None, "no span")
    low = importlib.import_module("llama_cpp")
    memory = llama._ctx.memory
    removed = span.end - span.start
    stop = span.end + span.kept
    # Remove the tail first: if the span's removal is then refused, the cache still
    # holds exactly input_ids[:stop].
    if not low.llama_memory_seq_rm(memory, _SEQ, stop, -1):
        return TrimResult(None, "removal refused")
    llama.n_tokens = stop
    if not low.llama_memory_seq_rm(memory, _SEQ, span.start, span.end):
        return TrimResult(None, "removal refused")
    low.llama_memory_seq_add(memory, _SEQ, span.end, stop, -removed)
    ids = llama.input_ids
    ids[span.start : span.start + span.kept] = ids[span.end : stop].copy()
    if llama._logits_all:  # one row of logits per position: move them with their tokens
        llama.scores[span.start : span.start + span.kept] = llama.scores[span.end : stop].copy()
    llama.n_tokens = span.start + span.kept
    llama._requires_eval = True  # the last logits belong to a token no longer last
    return TrimResult(span, "trimmed")


class CacheKeeper:
    """Whose conversation a shared model's KV cache holds, and the in-place trim made
    for each generation. Sessions sharing a model overwrite each other's cache, so a
    trim is tried only when the cache is the asking session's own (and then checked
    token by token)."""

    def __init__(self) -> None:
        self.owner: object | None = None  # the source whose prompt and reply are cached
        self.last: TrimResult | None = None  # what the last generation's trim did

    def fit(
        self, llama: Any, owner: object | None, trim: bool, tokens: Callable[[], list[int] | None]
    ) -> TrimResult:
        """Before ``owner`` generates: trim the cache in place for its prompt (its
        ``tokens()``) when ``trim`` is on and the cache is ``owner``'s."""
        ours = owner is not None and self.owner is owner
        self.owner = owner
        if not trim or not ours:
            self.last = TrimResult(None, "off" if not trim else "not this session's cache")
            return self.last
        try:
            prompt = tokens()
            if prompt is None:
                self.last = TrimResult(None, "no chat template")
            else:
                self.last = trim_in_place(llama, prompt)
        except Exception as exc:  # internals not as expected: forget the cache, read it all
            llama.n_tokens = 0  # llama-cpp-python then clears the KV cache before its eval
            self.last = TrimResult(None, f"failed ({type(exc).__name__})")
        return self.last


def evaluated_tokens(llama: Any) -> int:
    """Tokens llama.cpp has evaluated in this context so far (prompt and generated),
    from its own performance counters; 0 when they cannot be read."""
    try:
        low = importlib.import_module("llama_cpp")
        data = low.llama_perf_context(llama._ctx.ctx)
        return int(data.n_p_eval) + int(data.n_eval)
    except (AttributeError, ImportError, TypeError):
        return 0

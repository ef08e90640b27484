"""Silero VAD (its ONNX model) under onnxruntime, behind the shared front.

The model file ships in the ``silero-vad`` wheel; the package is found with
``importlib.util.find_spec`` and never imported (it imports torch). The model
takes, per window, the previous window's last 64 samples (32 at 8 kHz) followed
by 512 new ones (256 at 8 kHz) as float32 in [-1, 1], its recurrent state
``(2, 1, 128)`` and the rate; it returns the speech probability and the next
state. The session is loaded once per process and shared (``run`` is
thread-safe); the state and context are per ``SileroVad``, i.e. per session.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from ..vocab.audio import Samples
from . import onnx_sessions
from .front import VadFront
from .settings import VadSettings


class VadError(RuntimeError):
    """The detector's model cannot be loaded or run (one line)."""


_MODEL = "silero_vad.onnx"
# The same weights without the graph's branch on the rate: its 16 kHz
# probabilities match the full model's to 1e-6 at about 0.85 of the CPU per
# window; at 8 kHz it computes 16 kHz features, so 8 kHz keeps the full model.
# (Shipped since silero-vad 6; without it, the full model.)
_MODEL_16K = "silero_vad_op18_ifless.onnx"


def model_path(model_rate: int = 8000) -> Path:
    """The model file inside the installed silero-vad wheel, for ``model_rate``."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise VadError("Silero VAD model not found: install silero-vad (pip install --no-deps)")
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    if model_rate == 16_000 and (data / _MODEL_16K).is_file():
        return data / _MODEL_16K
    path = data / _MODEL
    if not path.is_file():
        raise VadError(f"Silero VAD model not found at {path}")
    return path


def shared_session(path: Path | None = None) -> Any:
    """The process's onnxruntime session for the model (one intra-op thread:
    a window costs well under a millisecond, and the LLM and the voice need the
    cores)."""
    path = path or model_path()
    try:
        return onnx_sessions.shared_session(path, threads=1)
    except ImportError:
        raise
    except Exception as exc:  # onnxruntime raises its own kinds
        raise VadError(f"cannot load Silero VAD model {path}: {exc}") from exc


class SileroVad(VadFront):
    """Silero at 16 kHz (512-sample, 32 ms windows) or natively at 8 kHz
    (256 samples); any other input rate is resampled to 16 kHz."""

    skips_deep_silence = True

    def __init__(
        self, settings: VadSettings | None = None, sample_rate: int = 16_000, session: Any = None
    ) -> None:
        model_rate = 8000 if sample_rate == 8000 else 16_000
        self._session = session if session is not None else shared_session(model_path(model_rate))
        self._context_size = 32 if model_rate == 8000 else 64
        self._sr = np.array(model_rate, dtype=np.int64)
        window = 256 if model_rate == 8000 else 512
        super().__init__(settings or VadSettings(), sample_rate, model_rate, window)

    def _reset_model(self) -> None:
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros((1, self._context_size), dtype=np.float32)

    def _score(self, window: Samples) -> float:
        x = np.concatenate([self._context, _scaled(window)[None, :]], axis=1)
        out, self._state = self._session.run(
            None, {"input": x, "state": self._state, "sr": self._sr}
        )
        self._context = x[:, -self._context_size :]
        return float(out[0, 0])


def _scaled(window: Samples) -> np.ndarray:
    """int16 samples as the model takes them: float32 in [-1, 1)."""
    return window.astype(np.float32) / 32768.0


def score_together(items: list[tuple[SileroVad, list[Samples]]]) -> list[list[float]]:
    """The probabilities of many detectors' consecutive windows (``stage``'s),
    as ``score`` gives them one detector at a time, in as few model calls as
    the detectors' sessions and window counts allow: the first window of every
    detector in one batch, then the second, … (each detector's state goes on
    from one of its windows to the next). Equal to ``score``'s to float rounding."""
    scores: list[list[float]] = [[] for _ in items]
    for turn in range(max((len(windows) for _, windows in items), default=0)):
        by_session: dict[int, list[int]] = {}
        for index, (vad, windows) in enumerate(items):
            if len(windows) > turn:
                by_session.setdefault(id(vad._session), []).append(index)
        for indices in by_session.values():
            vads = [items[i][0] for i in indices]
            probabilities = _score_batch(vads, [items[i][1][turn] for i in indices])
            for i, probability in zip(indices, probabilities, strict=True):
                scores[i].append(probability)
    return scores


def _score_batch(vads: list[SileroVad], windows: list[Samples]) -> list[float]:
    """One window each of distinct detectors sharing a model session, in one
    call: their contexts and states stacked as a batch."""
    if len(vads) == 1:
        return [vads[0]._score(windows[0])]
    first = vads[0]
    context = first._context_size
    x = np.empty((len(vads), context + first.window), dtype=np.float32)
    for row, vad, window in zip(x, vads, windows, strict=True):
        row[:context] = vad._context[0]
        row[context:] = _scaled(window)
    state = np.concatenate([vad._state for vad in vads], axis=1)
    out, state = first._session.run(None, {"input": x, "state": state, "sr": first._sr})
    for i, vad in enumerate(vads):
        vad._state = np.ascontiguousarray(state[:, i : i + 1, :])
        vad._context = x[i : i + 1, -context:]
    return [float(p) for p in out[:, 0]]

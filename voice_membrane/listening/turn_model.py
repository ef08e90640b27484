"""The end-of-turn model: has the user finished, judged from the sound alone.

``load_turn_model("smart-turn")`` gives Pipecat's smart-turn v3.2 (BSD-2), an
ONNX model (Whisper's encoder, 8 s of audio in, the probability that the
speaker is done out) shipped inside the ``pipecat-ai`` wheel. The wheel is
installed with ``--no-deps`` (scripts/install-package.sh) and never imported:
the file is found with ``importlib.util.find_spec`` as Silero's is. Its input is
``turn_features.log_mel`` (numpy only). The onnxruntime session is loaded once
per process and shared; ``done_probability`` is thread-safe (onnxruntime's
``run`` is, and the features are the call's own), so a served process's
listeners may all ask at once from their worker threads.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from . import onnx_sessions
from .turn_features import log_mel

SMART_TURN = "smart-turn"
# Where the model sits inside the pipecat-ai wheel (1.14.0: smart-turn v3.2, 8.7 MB).
_PACKAGE = "pipecat"
_MODEL_IN_PACKAGE = ("audio", "turn", "smart_turn", "data", "smart-turn-v3.2-cpu.onnx")
_INSTALL = (
    "install pipecat-ai (pip install --no-deps pipecat-ai==1.14.0, as install-package.sh does)"
)
# One intra-op thread: on this project's 2 cores, busy when a pause begins (the
# recogniser's final starts then too), two were no faster and took 7 % more CPU
# (docs/listening.md, "The end-of-turn model").
_THREADS = 1


class TurnModel(Protocol):
    """Judges whether an utterance is finished."""

    name: str

    def done_probability(self, samples: NDArray[np.float32]) -> float:
        """The probability the speaker is done, for mono float32 audio in [-1, 1]
        at 16 kHz up to the moment of asking (any length: the last 8 s count)."""
        ...


class TurnModelError(RuntimeError):
    """The end-of-turn model cannot be loaded (one line)."""


def smart_turn_path() -> Path:
    """The model file inside the installed pipecat-ai wheel."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise TurnModelError(f"end-of-turn model {SMART_TURN!r} not found: {_INSTALL}")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*_MODEL_IN_PACKAGE)


def _shared_session(path: Path) -> Any:
    if not path.is_file():
        raise TurnModelError(f"end-of-turn model {SMART_TURN!r} not found at {path}: {_INSTALL}")
    try:
        return onnx_sessions.shared_session(path, _THREADS)
    except ImportError as exc:
        raise TurnModelError(
            f"end-of-turn model {SMART_TURN!r} needs onnxruntime: "
            "install voice-membrane[local] or [cloud]"
        ) from exc
    except Exception as exc:  # onnxruntime raises its own kinds
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TurnModelError(f"cannot load end-of-turn model {path}: {first}") from exc


class SmartTurn:
    """Smart-turn v3.2 on a shared onnxruntime session."""

    name: str = SMART_TURN

    def __init__(self, session: Any) -> None:
        self._session = session

    def done_probability(self, samples: NDArray[np.float32]) -> float:
        features = log_mel(samples)[None]
        (out,) = self._session.run(None, {"input_features": features})
        return float(np.asarray(out).reshape(-1)[0])


def load_turn_model(name: str, model_file: Path | None = None) -> TurnModel:
    """The end-of-turn model called ``name`` (``"smart-turn"``), its session the
    process's shared one; ``model_file`` overrides where the ONNX file is.
    ``TurnModelError`` in one line naming what is missing."""
    if name != SMART_TURN:
        raise TurnModelError(f"unknown end-of-turn model {name!r} (known: {SMART_TURN})")
    return SmartTurn(_shared_session(model_file or smart_turn_path()))


__all__ = [
    "SMART_TURN",
    "SmartTurn",
    "TurnModel",
    "TurnModelError",
    "load_turn_model",
    "smart_turn_path",
]

"""One onnxruntime session per model file per process, shared by every caller
(Silero's detector, the end-of-turn model): ``run`` is thread-safe, and a
session per listener would load the model again for each."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_sessions: dict[str, Any] = {}


def shared_session(path: Path, threads: int) -> Any:
    """The process's session for the model at ``path`` (``threads`` intra-op
    threads). Raises ImportError without onnxruntime, and onnxruntime's own
    errors for a file it cannot load: the caller says which model it was."""
    key = str(path.resolve())
    with _lock:
        session = _sessions.get(key)
        if session is None:
            import onnxruntime  # type: ignore[import-untyped]

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            # errors only: a graph's unused initializers would print warnings to
            # the user's terminal at every start
            options.log_severity_level = 3
            session = onnxruntime.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            _sessions[key] = session
    return session

"""Helper processes of the benchmarks (``python -m voice_membrane.…``), run with
this process's voice_membrane, even a checkout that is not installed."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..testing.child import Child, child_process

# The folder that holds this voice_membrane package.
_ROOT = str(Path(__file__).resolve().parent.parent.parent)


def library_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (else this process's environment) with this voice_membrane first
    on ``PYTHONPATH``."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
    return env


@contextlib.contextmanager
def bench_child(module: str, args: list[str]) -> Iterator[Child]:
    """``python -m module args…``, ended when the block is left (its stdin closes)."""
    with child_process(module, args, library_env()) as child:
        yield child

"""A benchmark's helper process (``voice_membrane.testing.child``), run from the
repository's root."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from voice_membrane.testing.child import Child
from voice_membrane.testing.child import child_process as _child_process

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["Child", "child_process"]


@contextlib.contextmanager
def child_process(
    module: str, args: list[str], env: dict[str, str] | None = None
) -> Iterator[Child]:
    with _child_process(module, args, env, cwd=ROOT) as child:
        yield child

"""Environment variables set for a while: the engines under measurement read
their keys and base URLs there."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def variables(**values: str) -> Iterator[None]:
    """Each of ``values`` set in ``os.environ``, and as it was afterwards."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

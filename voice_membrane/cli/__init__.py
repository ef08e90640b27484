"""The ``voice-membrane`` command, a face: ``run`` (``run.py``), ``demo``
(``demo.py``), and the flags of ``serve`` and ``bench`` (``main.py``)."""

from .main import main

__all__ = ["main"]

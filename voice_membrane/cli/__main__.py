"""``python -m voice_membrane.cli``: the ``voice-membrane`` command."""

from .main import main

main()

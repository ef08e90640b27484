"""Benchmarks for voice_membrane: run them with ``python -m benchmarks.run`` (``make bench``)."""

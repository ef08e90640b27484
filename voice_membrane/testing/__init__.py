"""Offline test helpers shipped with the library.

They need no network, no API key and no sound card: use them in this project's
tests and in the tests of applications built on voice_membrane.
"""

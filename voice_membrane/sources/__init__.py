"""Where the user's voice comes from: microphone, a WAV file in real time."""

from .base import AudioSource, Frame, SourceError
from .microphone import MicrophoneSource, input_available
from .registry import open_source
from .wav_file import WavFileSource

__all__ = [
    "AudioSource",
    "Frame",
    "MicrophoneSource",
    "SourceError",
    "WavFileSource",
    "input_available",
    "open_source",
]

"""The listening cores, sans-I/O: voice activity detection and endpointing,
fed audio and counting samples, never the wall clock (docs/listening.md)."""

from .decisions import (
    Decision,
    EndOfTurn,
    FinalizeStt,
    Interrupt,
    LateTranscript,
    PausePlayout,
    ResumePlayout,
)
from .endpointer import Endpointer
from .engines import VadError, make_vad
from .front import VadFront
from .settings import EndpointSettings, VadSettings
from .vad import SpeechEnd, SpeechStart, VadEvent, VadWindow, samples_after

__all__ = [
    "Decision",
    "EndOfTurn",
    "EndpointSettings",
    "Endpointer",
    "FinalizeStt",
    "Interrupt",
    "LateTranscript",
    "PausePlayout",
    "ResumePlayout",
    "SpeechEnd",
    "SpeechStart",
    "VadError",
    "VadEvent",
    "VadFront",
    "VadSettings",
    "VadWindow",
    "make_vad",
    "samples_after",
]

"""Sans-I/O stream parsers: provider output in, block events out."""

from .native import NativeBlockAssembler
from .stops import StopScanner
from .xml_stream import XmlStreamParser

__all__ = ["NativeBlockAssembler", "StopScanner", "XmlStreamParser"]

"""Sans-I/O stream parsers: provider text in, block events out."""

from .xml_stream import XmlStreamParser

__all__ = ["XmlStreamParser"]

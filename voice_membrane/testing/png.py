"""Small real PNG images made in code (zlib + struct), for the fake servers'
generated images, and a strict reader to check them in tests.

``solid_png(16, 16, (200, 40, 40))`` is a valid 8-bit RGB PNG any decoder
reads; ``read_png(data)`` checks the signature, every chunk's CRC, the header
and the pixel data's length, and returns the size and the first pixel.
"""

from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))


def solid_png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A ``width`` by ``height`` PNG of one colour (8-bit RGB, no interlace)."""
    if width < 1 or height < 1:
        raise ValueError(f"a PNG is at least 1x1, got {width}x{height}")
    row = b"\x00" + bytes(rgb) * width  # filter type 0 (None) on each scanline
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join(
        (
            SIGNATURE,
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(row * height)),
            _chunk(b"IEND", b""),
        )
    )


def read_png(data: bytes) -> tuple[int, int, tuple[int, int, int]]:
    """(width, height, first pixel) of an 8-bit RGB PNG; ``ValueError`` saying
    what is wrong for anything else."""
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG: bad signature")
    at, chunks = len(SIGNATURE), []
    while at < len(data):
        if at + 8 > len(data):
            raise ValueError("truncated chunk header")
        (length,), tag = struct.unpack(">I", data[at : at + 4]), data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        if len(body) != length or zlib.crc32(tag + body) != crc:
            raise ValueError(f"chunk {tag!r}: bad length or CRC")
        chunks.append((tag, body))
        at += 12 + length
    if not chunks or chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise ValueError("chunks must run IHDR … IEND")
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if (depth, colour, interlace) != (8, 2, 0):
        raise ValueError("only 8-bit RGB, non-interlaced PNGs are read here")
    pixels = zlib.decompress(b"".join(body for tag, body in chunks if tag == b"IDAT"))
    if len(pixels) != height * (1 + 3 * width):
        raise ValueError("pixel data does not match the header's size")
    if pixels[0] != 0:
        raise ValueError("only filter type 0 is read here")
    return width, height, (pixels[1], pixels[2], pixels[3])

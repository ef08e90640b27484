"""Where a voice turn's generated images go: never to speech, to the log stream.

A turn's final images are handed to an ``ImageSaver`` (``image -> where``: a
file path, a URL, ``blob:<id>``) and logged as an ``image`` record saying where
they went. ``ImageFolder`` saves files (``voice-membrane run``); ``inline_url``
gives a ``data:`` URL, or the blob id of a stored image (``serve``). The log
records never hold the image's base64 data. See docs/images.md.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeAlias

import anyio

from ..vocab.messages import GeneratedImageContent

ImageSaver: TypeAlias = Callable[[GeneratedImageContent], Awaitable[str]]
"""Puts a final generated image somewhere; returns where (path, URL, ``blob:<id>``)."""

EXTENSIONS = {"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp", "image/gif": ".gif"}
DEFAULT_FOLDER = Path("voice-membrane-images")  # under the working directory
_log = logging.getLogger(__name__)


class ImageFolder:
    """Saves each image as a file in ``folder`` (made when the first image
    comes): ``image-YYYYmmdd-HHMMSS-N.png``, never overwriting a file. An image
    held only by its blob id is not saved: its ``blob:<id>`` is where it is."""

    def __init__(self, folder: Path = DEFAULT_FOLDER) -> None:
        self.folder = folder
        self._numbers = itertools.count(1)

    async def __call__(self, image: GeneratedImageContent) -> str:
        if image.data is None:
            return f"blob:{image.blob_id}"
        data = image.decoded()
        return str(await anyio.to_thread.run_sync(self._write, data, image.mime_type))

    def _write(self, data: bytes, mime_type: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        extension = EXTENSIONS.get(mime_type, ".img")
        while True:
            path = self.folder / f"image-{stamp}-{next(self._numbers)}{extension}"
            try:
                with path.open("xb") as file:  # "x": a file of that name is never replaced
                    file.write(data)
                return path
            except FileExistsError:
                continue


async def inline_url(image: GeneratedImageContent) -> str:
    """The image as a ``data:`` URL the page can show while its bytes are at hand
    (a freshly stored image has both); ``blob:<id>`` when only the id is."""
    if image.data is not None:
        return f"data:{image.mime_type};base64,{image.data}"
    return f"blob:{image.blob_id}"


def image_summary(image: GeneratedImageContent | None) -> dict[str, Any] | None:
    """An image as a log record holds it: everything but its data."""
    if image is None:
        return None
    summary: dict[str, Any] = {
        "mime_type": image.mime_type,
        "bytes": len(image.decoded()) if image.data is not None else None,
        "blob_id": image.blob_id,
    }
    if image.generation is not None:
        summary.update(image.generation.model_dump())
    return summary


async def save_image(
    saver: ImageSaver | None, index: int, image: GeneratedImageContent
) -> dict[str, Any]:
    """The ``image`` log record of a turn's final image, after saving it.
    A failure to save is said in the record (``error``), not raised: the turn
    goes on and is spoken."""
    record: dict[str, Any] = {"event": "image", "index": index, **(image_summary(image) or {})}
    if saver is None:
        record["where"] = f"blob:{image.blob_id}" if image.blob_id else None
        return record
    try:
        record["where"] = await saver(image)
    except (OSError, ValueError) as exc:
        _log.warning("generated image %s not saved: %s", index, exc)
        record["where"], record["error"] = None, f"not saved: {exc}"
    return record

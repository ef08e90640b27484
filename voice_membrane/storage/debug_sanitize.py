"""Large media out of debug records: base64 strings moved to a blob store.

A provider request or response kept for debugging may hold megabytes of
base64 (an image in a request, a generated image in a reply).
``sanitize_for_storage`` walks a JSON-like value and replaces each large base64
string — found by its shape (at least ``threshold`` characters of canonical
base64, or a ``data:…;base64,`` URL), or by its path (``always_paths``) — with
a reference::

    {"__blobRef": "<sha256 hex>", "originalSize": <characters replaced>,
     "mediaType": "image/png"}

and ``restore_from_storage`` puts the exact strings back. The bytes are stored
decoded (the blob of an image is the image file); a reference records what
else is needed to rebuild the string exactly: a data URL's ``prefix``, or
``"encoding": "base64url"`` for URL-safe base64 (google-genai's bytes), or
``"encoding": "utf-8"`` for a string forced out by its path that is not
base64. A dict of the input that already has a ``__blobRef`` or
``__blobEscape`` key is wrapped as ``{"__blobEscape": {…}}`` so it is never
read as a reference. Neither function changes its input.

The media type is taken from a sibling key (``media_type``, ``mediaType``,
``mime_type``, ``mimeType``: Anthropic's and Gemini's shapes), a data URL's
header, or the bytes (PNG, JPEG, GIF, WebP); else ``application/octet-stream``.

This module is vocabulary: it needs only a ``blobs.BlobStore``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Any, Final

from .blobs import BlobStore, check_blob_id, sniff_image_type

REF: Final = "__blobRef"
ESCAPE: Final = "__blobEscape"
DEFAULT_THRESHOLD: Final = 10 * 1024
MEDIA_TYPE_KEYS: Final = ("media_type", "mediaType", "mime_type", "mimeType")
OCTET_STREAM: Final = "application/octet-stream"

_BASE64: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_BASE64URL: Final = re.compile(r"[A-Za-z0-9_-]*={0,2}")  # google-genai sends bytes so
_DATA_URL: Final = re.compile(r"(data:([a-z]+/[a-z0-9.+-]+)(?:;[^,;]*)*;base64,)(.*)", re.DOTALL)


async def sanitize_for_storage(
    obj: Any,
    store: BlobStore,
    threshold: int = DEFAULT_THRESHOLD,
    always_paths: Sequence[str] = (),
) -> Any:
    """``obj`` with its large base64 strings stored in ``store`` and referenced.

    ``always_paths``: dotted paths whose strings are stored whatever their size,
    e.g. ``"messages.*.content.*.source.data"`` (``*`` matches one key or list
    index)."""
    patterns = [tuple(path.split(".")) for path in always_paths]
    return await _Sanitizer(store, threshold, patterns).walk(obj, ())


async def restore_from_storage(obj: Any, store: BlobStore) -> Any:
    """``obj`` with every reference replaced by the string it stands for."""
    if isinstance(obj, dict):
        if set(obj) == {ESCAPE} and isinstance(obj[ESCAPE], dict):
            return {key: await restore_from_storage(v, store) for key, v in obj[ESCAPE].items()}
        if REF in obj:
            return await _restore_ref(obj, store)
        return {key: await restore_from_storage(v, store) for key, v in obj.items()}
    if isinstance(obj, list):
        return [await restore_from_storage(v, store) for v in obj]
    if isinstance(obj, tuple):
        return tuple([await restore_from_storage(v, store) for v in obj])
    return obj


class _Sanitizer:
    def __init__(self, store: BlobStore, threshold: int, patterns: list[tuple[str, ...]]) -> None:
        self.store, self.threshold, self.patterns = store, threshold, patterns

    async def walk(self, obj: Any, path: tuple[str, ...], media_type: str | None = None) -> Any:
        if isinstance(obj, str):
            return await self._string(obj, path, media_type)
        if isinstance(obj, dict):
            sibling = _media_type_of(obj)
            out = {
                key: await self.walk(value, (*path, str(key)), sibling)
                for key, value in obj.items()
            }
            return {ESCAPE: out} if REF in obj or ESCAPE in obj else out
        if isinstance(obj, list | tuple):
            items = [await self.walk(v, (*path, str(n))) for n, v in enumerate(obj)]
            return items if isinstance(obj, list) else tuple(items)
        return obj

    async def _string(self, text: str, path: tuple[str, ...], media_type: str | None) -> Any:
        forced = any(_matches(pattern, path) for pattern in self.patterns)
        if not forced and len(text) < self.threshold:
            return text
        if (match := _DATA_URL.fullmatch(text)) and (data := _decode(match[3])) is not None:
            return await self._ref(text, data, match[2], prefix=match[1])
        if (data := _decode(text)) is not None:
            return await self._ref(text, data, media_type or sniff_image_type(data))
        if (data := _decode(text, url_safe=True)) is not None:
            kind = media_type or sniff_image_type(data)
            return await self._ref(text, data, kind, encoding="base64url")
        if forced:
            data = text.encode("utf-8", "surrogatepass")
            return await self._ref(text, data, OCTET_STREAM, encoding="utf-8")
        return text

    async def _ref(
        self,
        text: str,
        data: bytes,
        media_type: str | None,
        *,
        prefix: str | None = None,
        encoding: str | None = None,
    ) -> dict[str, Any]:
        media_type = media_type or OCTET_STREAM
        blob_id = await self.store.store(data, media_type)
        ref: dict[str, Any] = {REF: blob_id, "originalSize": len(text), "mediaType": media_type}
        if prefix is not None:
            ref["prefix"] = prefix
        if encoding is not None:
            ref["encoding"] = encoding
        return ref


def _decode(text: str, *, url_safe: bool = False) -> bytes | None:
    """The bytes of canonical base64 (standard, or URL-safe) — encoding them again
    gives ``text`` exactly, so the string can be rebuilt from them; else None."""
    if len(text) % 4 or not (_BASE64URL if url_safe else _BASE64).fullmatch(text):
        return None
    try:
        data = base64.urlsafe_b64decode(text) if url_safe else base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if _encode(data, url_safe=url_safe) == text else None


def _encode(data: bytes, *, url_safe: bool = False) -> str:
    encoded = base64.urlsafe_b64encode(data) if url_safe else base64.b64encode(data)
    return encoded.decode("ascii")


async def _restore_ref(ref: dict[str, Any], store: BlobStore) -> str:
    data = await store.load(check_blob_id(ref[REF]))
    encoding = ref.get("encoding")
    if encoding == "utf-8":
        return data.decode("utf-8", "surrogatepass")
    return str(ref.get("prefix", "")) + _encode(data, url_safe=encoding == "base64url")


def _media_type_of(obj: dict[Any, Any]) -> str | None:
    for key in MEDIA_TYPE_KEYS:
        value = obj.get(key)
        if isinstance(value, str) and re.fullmatch(r"[a-z]+/[a-z0-9.+-]+", value):
            return value
    return None


def _matches(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    return len(pattern) == len(path) and all(
        p in ("*", k) for p, k in zip(pattern, path, strict=True)
    )


__all__ = ["DEFAULT_THRESHOLD", "ESCAPE", "REF", "restore_from_storage", "sanitize_for_storage"]

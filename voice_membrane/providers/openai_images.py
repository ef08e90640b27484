"""OpenAIImages: the OpenAI Images API (``gpt-image-1``) as an ``ImageGenerator``.

``generate(prompt)`` calls ``images.generate(..., stream=True, partial_images=N)``
over the official SDK and yields an image block: ``NativeStart("image")``, one
``NativeImage`` per partial image (``image_generation.partial_image`` events,
in their order), the final image (``image_generation.completed``), then
``NativeStop``. The reading of each event is ``image_event``, sans-I/O. Offered
to a chat model as a function tool by ``images.ImageTool`` (docs/images.md).
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import openai

from ..infra.redact import remember
from ..vendors.openai_client import NAME, STREAM_ERRORS, async_client, provider_error
from ..vocab.messages import GeneratedImageContent, GenerationInfo
from ..vocab.provider_output import NativeImage, NativeStart, NativeStop, ProviderOutput
from . import fields

_log = logging.getLogger("voice_membrane.providers")
MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
MAX_PARTIAL_IMAGES = 3  # what the API accepts


class OpenAIImages:
    """Generates images with the Images API; ``partial_images`` (0 to 3) partial
    images stream before the final one. ``size`` / ``quality`` are defaults a
    call may override. ``api_key`` / ``base_url`` default to ``OPENAI_API_KEY``
    / ``OPENAI_BASE_URL``."""

    name = NAME

    def __init__(
        self,
        *,
        model: str = "gpt-image-1",
        size: str | None = None,
        quality: str | None = None,
        partial_images: int = 2,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 180.0,  # an image takes tens of seconds
    ) -> None:
        if not 0 <= partial_images <= MAX_PARTIAL_IMAGES:
            raise ValueError(
                f"partial_images must be 0 to {MAX_PARTIAL_IMAGES}, got {partial_images}"
            )
        self.model, self.size, self.quality = model, size, quality
        self.partial_images = partial_images
        self._api_key, self._base_url, self._timeout_s = api_key, base_url, timeout_s
        remember(api_key)
        self._client: openai.AsyncOpenAI | None = None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def generate(
        self, prompt: str, *, size: str | None = None, quality: str | None = None
    ) -> AsyncGenerator[ProviderOutput, None]:
        """The image block of one generation; ``ProviderError`` if it fails."""
        if self._client is None:
            self._client = async_client(self._api_key, self._base_url, self._timeout_s)
        client = self._client
        kwargs: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt,
            "n": 1,
            "stream": True,
            "partial_images": self.partial_images,
        }
        if size or self.size:
            kwargs["size"] = size or self.size
        if quality or self.quality:
            kwargs["quality"] = quality or self.quality
        try:
            stream = await client.images.generate(**kwargs)
            yield NativeStart("image", prompt=prompt)
            try:
                async for event in stream:
                    item = image_event(event, prompt, self.model)
                    if item is not None:
                        yield item
            finally:
                with anyio.CancelScope(shield=True):
                    await stream.close()
            yield NativeStop()
        except STREAM_ERRORS as exc:
            raise provider_error(exc).at(str(client.base_url)) from exc


def image_event(event: Any, prompt: str, model: str) -> NativeImage | None:
    """One streamed Images API event as a ``NativeImage``; None (logged) for an
    event that is not an image or whose image is not base64."""
    kind = fields.text(event, "type", "image event")
    if kind not in ("image_generation.partial_image", "image_generation.completed"):
        _log.warning("image event of unknown type %r ignored", kind)
        return None
    data = fields.text(event, "b64_json", kind)
    if not data or not _is_base64(data):
        _log.warning("%s without base64 image data ignored", kind)
        return None
    output_format = fields.text(event, "output_format", kind) or "png"
    generation = GenerationInfo(
        prompt=prompt,
        revised_prompt=fields.text(event, "revised_prompt", kind),  # dall-e-3 only, if ever
        model=model,
        size=fields.text(event, "size", kind),
        quality=fields.text(event, "quality", kind),
    )
    image = GeneratedImageContent(
        data=data,
        mime_type=MEDIA_TYPES.get(output_format, "image/png"),
        is_preview=kind == "image_generation.partial_image",
        generation=generation,
    )
    return NativeImage(image)


def _is_base64(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True

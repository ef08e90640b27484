"""Generated images in a reply: the image tool a model calls, and where images go.

``ImageTool(generator)`` offers an image generator (``providers.openai_images``:
the OpenAI Images API) to any chat model as a function tool, ``generate_image``.
When the model calls it, the reply loop runs the generator and its partial and
final images flow out as an ``image`` block (never visible, never spoken); the
tool's result, a line of text, goes back to the model, which goes on speaking.

``ImageStore``: where the final images are stored when a reply has one (a blob
store's ``store(data, media_type) -> blob_id``); the history then references the
image by id. See docs/images.md.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from ..vocab.messages import GeneratedImageContent, ToolDefinition
from ..vocab.provider_output import NativeImage, ProviderOutput

_log = logging.getLogger(__name__)

ImageStore: TypeAlias = Callable[[bytes, str], Awaitable[str]]
"""``store(data, media_type) -> blob_id`` (a ``BlobStore.store``, bound)."""


class ImageGenerator(Protocol):
    """Makes images from a prompt: yields ``NativeStart("image")``, then
    ``NativeImage`` items — the partial images, then the final one — then
    ``NativeStop``; raises ``ProviderError`` when it fails."""

    name: str

    def generate(
        self, prompt: str, *, size: str | None = None, quality: str | None = None
    ) -> AsyncGenerator[ProviderOutput, None]: ...

    async def aclose(self) -> None: ...


def _schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "What the image shows, in detail."},
            "size": {
                "type": "string",
                "enum": ["1024x1024", "1536x1024", "1024x1536", "auto"],
                "description": "Width x height; square unless asked otherwise.",
            },
        },
        "required": ["prompt"],
    }


@dataclass(frozen=True)
class ImageTool:
    """An image generator offered to the model as the function tool ``name``."""

    generator: ImageGenerator
    name: str = "generate_image"
    description: str = (
        "Generate an image from a description. The user sees the image; it is "
        "not read aloud, so say in a sentence what you made."
    )
    input_schema: dict[str, Any] = field(default_factory=_schema)

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name, description=self.description, input_schema=self.input_schema
        )


def tool_arguments(input: dict[str, Any]) -> tuple[str, str | None, str | None] | str:
    """(prompt, size, quality) from an image tool call's input, or what is wrong."""
    prompt = input.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return "the call needs a non-empty string 'prompt'"
    size, quality = input.get("size"), input.get("quality")
    return (
        prompt,
        size if isinstance(size, str) and size else None,
        quality if isinstance(quality, str) and quality else None,
    )


def result_text(image: GeneratedImageContent | None) -> str:
    """The tool result the model reads once its image is made."""
    if image is None:
        return "no image was produced"
    said = "the image was generated and shown to the user"
    revised = image.generation.revised_prompt if image.generation else None
    return f"{said} (revised prompt: {revised})" if revised else said


async def stored(image: GeneratedImageContent, store: ImageStore) -> GeneratedImageContent:
    """``image`` with the blob id ``store`` gave it (its data kept, for the
    callbacks); ``image`` unchanged, and logged, if storing failed: the image
    is never lost for want of a store."""
    if image.data is None or image.blob_id is not None:
        return image
    try:
        blob_id = await store(base64.b64decode(image.data), image.mime_type)
    except Exception as exc:  # a full disk, a store down: keep the image inline
        _log.warning("generated image not stored (%s: %s); kept inline", type(exc).__name__, exc)
        return image
    return image.model_copy(update={"blob_id": blob_id})


async def stored_output(output: ProviderOutput, store: ImageStore | None) -> ProviderOutput:
    """A final image stored in ``store``, when there is one; any other output as it is."""
    if store is None or not isinstance(output, NativeImage) or output.image.is_preview:
        return output
    return NativeImage(await stored(output.image, store))


def for_history(image: GeneratedImageContent) -> GeneratedImageContent:
    """What the conversation keeps: a stored image by its id alone."""
    if image.blob_id is not None and image.data is not None:
        return image.model_copy(update={"data": None})
    return image

"""Blob images read into a request at the last moment, just before it is built.

``Membrane.stream`` calls ``resolve_blobs`` on the request it is about to format
and send: by then ``pipeline/history.py`` has dropped the turns that do not fit
the context, so a blob of a dropped turn is never read. Each distinct blob is
read once, all of them concurrently but at most ``limit`` at a time; each
``BlobSource`` becomes the ``Base64Source`` the provider mappings already know.
A blob that cannot be read is a ``RequestError`` naming its id and the message
it belongs to, raised before any network call. The conversation the caller
keeps still holds the references: the bytes live only as long as the reply.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import anyio

from ..infra.redact import quote
from ..vocab.blob_source import BlobSource
from ..vocab.messages import (
    Base64Source,
    ContentBlock,
    GeneratedImageContent,
    ImageContent,
    Message,
    Request,
    RequestError,
    ToolResultContent,
)
from .blobs import BlobError, BlobStore

DEFAULT_LIMIT = 8  # blobs read at once


@dataclass(frozen=True, slots=True)
class _Use:
    """Where a blob is used, for the error that names it."""

    source: BlobSource
    where: str


def _generated_source(image: GeneratedImageContent) -> BlobSource | None:
    """A generated image held only by its blob id, as a source to read."""
    if image.data is not None or image.blob_id is None:
        return None
    return BlobSource(blob_id=image.blob_id, media_type=image.mime_type)


def blob_uses(request: Request) -> list[_Use]:
    """Every blob image in the request (in messages and in tool results), in order."""
    uses: list[_Use] = []
    for m, message in enumerate(request.messages):
        owner = f"messages[{m}] (from {quote(message.participant)})"
        for c, block in enumerate(message.content):
            if isinstance(block, ImageContent) and isinstance(block.source, BlobSource):
                uses.append(_Use(block.source, f"{owner}.content[{c}]"))
            elif isinstance(block, GeneratedImageContent):
                # A generated image the history keeps by id (docs/images.md).
                if (generated := _generated_source(block)) is not None:
                    uses.append(_Use(generated, f"{owner}.content[{c}]"))
            elif isinstance(block, ToolResultContent) and not isinstance(block.content, str):
                for p, part in enumerate(block.content):
                    if isinstance(part, ImageContent) and isinstance(part.source, BlobSource):
                        uses.append(_Use(part.source, f"{owner}.content[{c}].content[{p}]"))
    return uses


async def resolve_blobs(
    request: Request, store: BlobStore | None, *, limit: int = DEFAULT_LIMIT
) -> Request:
    """``request`` with every blob image inline (base64); the same object when it
    has none. ``RequestError`` when a blob is missing, damaged, of another size
    than its reference says, or there is no store to read it from."""
    uses = blob_uses(request)
    if not uses:
        return request
    if store is None:
        first = uses[0]
        raise RequestError(
            f"{first.where}: blob {first.source.blob_id} cannot be read: no blob store is "
            "configured (a pipeline's [blobs] dir, or Membrane(blob_store=…))"
        )
    loaded: dict[str, bytes] = {}
    failed: dict[str, str] = {}
    limiter = anyio.CapacityLimiter(max(1, limit))

    async def load(blob_id: str) -> None:
        async with limiter:
            try:
                loaded[blob_id] = await store.load(blob_id)
            except BlobError as exc:  # kept, so the error can name the message
                failed[blob_id] = str(exc)
            except OSError as exc:
                failed[blob_id] = f"blob {blob_id} cannot be read: {exc.strerror or exc}"

    async with anyio.create_task_group() as tg:
        for blob_id in dict.fromkeys(use.source.blob_id for use in uses):
            tg.start_soon(load, blob_id)
    for use in uses:
        source = use.source
        if source.blob_id in failed:
            more = len(failed) - 1
            also = f" ({more} more blob(s) could not be read)" if more else ""
            raise RequestError(f"{use.where}: {failed[source.blob_id]}{also}")
        size = len(loaded[source.blob_id])
        if source.size_bytes is not None and source.size_bytes != size:
            raise RequestError(
                f"{use.where}: blob {source.blob_id} holds {size} bytes, "
                f"its reference says {source.size_bytes}"
            )
    inline = {blob_id: base64.b64encode(data).decode("ascii") for blob_id, data in loaded.items()}
    messages = [_inline_message(message, inline) for message in request.messages]
    return request.model_copy(update={"messages": messages})


def _inline_message(message: Message, inline: dict[str, str]) -> Message:
    content = [_inline_block(block, inline) for block in message.content]
    if all(new is old for new, old in zip(content, message.content, strict=True)):
        return message
    return message.model_copy(update={"content": content})


def _inline_block(block: ContentBlock, inline: dict[str, str]) -> ContentBlock:
    if isinstance(block, ImageContent):
        return _inline_image(block, inline)
    if isinstance(block, GeneratedImageContent) and _generated_source(block) is not None:
        return block.model_copy(update={"data": inline[block.blob_id or ""]})
    if isinstance(block, ToolResultContent) and not isinstance(block.content, str):
        parts = [
            _inline_image(part, inline) if isinstance(part, ImageContent) else part
            for part in block.content
        ]
        if any(new is not old for new, old in zip(parts, block.content, strict=True)):
            return block.model_copy(update={"content": parts})
    return block


def _inline_image(image: ImageContent, inline: dict[str, str]) -> ImageContent:
    source = image.source
    if not isinstance(source, BlobSource):
        return image
    data = inline[source.blob_id]
    return image.model_copy(
        update={"source": Base64Source(media_type=source.media_type, data=data)}
    )


def unresolved(source: BlobSource, where: str) -> RequestError:
    """The error of a request mapping handed a blob that was never read (a
    provider called without ``Membrane``, which reads them first)."""
    return RequestError(
        f"{where}.source: blob {source.blob_id} was not read before the request was built "
        "(send through a Membrane with a blob_store)"
    )


__all__ = ["DEFAULT_LIMIT", "blob_uses", "resolve_blobs", "unresolved"]

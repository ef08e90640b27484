"""A Gemini request's conversation written straight as the REST body's JSON.

google-genai validates the whole conversation into its pydantic types and
converts it field by field to the wire format on every call: ~0.3 ms per
message, a 100-message conversation ~30 ms before the first byte of every
turn (docs/membrane.md). Here each block becomes its wire JSON in one step,
as google-genai 3.6.1 writes it (a test holds the two equal: a blob's fields
stay snake_case there, as the API also reads them); ``gemini_send`` hands the
body to the SDK's HTTP client. ``gemini_request.request_contents`` reads the
same JSON into the SDK's types where the public call is made: one set of
rules.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes, urlparse

from ..storage.blob_resolve import unresolved
from ..vocab.blob_source import BlobSource
from ..vocab.messages import (
    Base64Source,
    ContentBlock,
    GeneratedImageContent,
    ImageContent,
    RequestError,
    TextContent,
    ThinkingContent,
    ToolResultContent,
    ToolUseContent,
)

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest

Json = dict[str, Any]
FALLBACK_IMAGE_TYPE = "image/jpeg"


def wire_contents(built: BuiltRequest) -> list[Json]:
    """``built.messages`` (and the prefill) as the body's ``contents``."""
    contents: list[Json] = []
    names: dict[str, str] = {}  # tool use id → tool name, for function responses
    for m, message in enumerate(built.messages):
        parts: list[Json] = []
        for c, block in enumerate(message.content):
            if isinstance(block, TextContent):  # (most of a conversation: kept quick)
                if block.text:  # the API rejects ""
                    parts.append({"text": block.text})
            else:
                parts += _parts(block, names, f"messages[{m}].content[{c}]")
        if parts:  # the API rejects a content with no parts
            role = "model" if message.role == "assistant" else "user"
            contents.append({"parts": parts, "role": role})
    if built.mode == "prefill" and built.prefill:
        prefill = {"text": built.prefill}
        if contents and contents[-1]["role"] == "model":
            contents[-1]["parts"].append(prefill)
        else:
            contents.append({"parts": [prefill], "role": "model"})
    return contents


def _parts(block: ContentBlock, names: dict[str, str], where: str) -> list[Json]:
    if isinstance(block, ImageContent):
        return [_image(block, where)]
    if isinstance(block, GeneratedImageContent):
        data = _b64decode(block.base64_data(where), f"{where}.data")
        return [_inline(block.mime_type, data)]
    if isinstance(block, ThinkingContent):
        signature = _signature(block.signature)
        if signature is None:
            return []
        return [{"text": block.thinking, "thought": True, "thoughtSignature": _b64(signature)}]
    if isinstance(block, ToolUseContent):
        names[block.id] = block.name
        part: Json = {"functionCall": {"id": block.id, "name": block.name, "args": block.input}}
        signature = _signature(block.signature)
        if signature is not None:
            part["thoughtSignature"] = _b64(signature)
        return [part]
    if isinstance(block, ToolResultContent):
        name = names.get(block.tool_use_id)
        if name is None:
            raise RequestError(
                f"{where}.tool_use_id: {block.tool_use_id!r} answers no earlier tool_use"
            )
        key = "error" if block.is_error else "result"
        answer = {"id": block.tool_use_id, "name": name, "response": {key: block.text()}}
        parts: list[Json] = [{"functionResponse": answer}]
        if not isinstance(block.content, str):
            images = [item for item in block.content if isinstance(item, ImageContent)]
            parts += [_image(item, where) for item in images]
        return parts
    return []  # redacted thinking: Gemini has no such thing


def _image(block: ImageContent, where: str) -> Json:
    source = block.source
    if isinstance(source, Base64Source):
        data = _b64decode(source.data, f"{where}.source.data")
        return _inline(source.media_type, data)
    if isinstance(source, BlobSource):
        raise unresolved(source, where)
    if source.url.startswith("data:"):
        header, _, payload = source.url[5:].partition(",")
        mime_type, _, encoding = header.partition(";")
        if encoding == "base64":
            data = _b64decode(payload, f"{where}.source.url")
        else:
            data = unquote_to_bytes(payload)
        return _inline(mime_type or FALLBACK_IMAGE_TYPE, data)
    guessed, _ = mimetypes.guess_type(urlparse(source.url).path)
    mime_type = guessed if guessed and guessed.startswith("image/") else FALLBACK_IMAGE_TYPE
    return {"fileData": {"file_uri": source.url, "mime_type": mime_type}}


def _inline(mime_type: str, data: bytes) -> Json:
    return {"inlineData": {"data": _b64(data), "mime_type": mime_type}}


def _b64(data: bytes) -> str:
    # (decoded and encoded again: the standard alphabet and padding, as the SDK sends)
    return base64.b64encode(data).decode("ascii")


def _b64decode(data: str, where: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError(f"{where}: not valid base64") from None


def _signature(signature: str | None) -> bytes | None:
    """A Gemini thought signature (base64, as the adapter reports it) as bytes;
    None when absent or not base64 (another provider's signature)."""
    if not signature:
        return None
    for altchars in (None, b"-_"):  # standard base64, or the URL-safe kind
        try:
            return base64.b64decode(signature, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
    return None

"""A ``BuiltRequest`` as google-genai's ``contents`` and ``GenerateContentConfig``.

Kept apart from the adapter so the wire shape of each normalized block can be
read (and tested) in one place:

- roles: user → ``user``, assistant → ``model``; a prefill is a final ``model``
  content the reply continues;
- images: base64 → ``inline_data``; ``data:`` URLs are decoded to
  ``inline_data``; http(s) URLs → ``file_data`` with the MIME type guessed from
  the path (``image/jpeg`` when it cannot be): the adapter never fetches;
- tool use → ``function_call`` (its id, and its ``signature`` as the part's
  ``thought_signature``); tool result → ``function_response`` named after the
  matching earlier tool use, ``{"result": text}`` or ``{"error": text}``, its
  images as ``inline_data`` parts beside it;
- thinking with a Gemini signature → a ``thought`` part carrying it (Gemini
  reads nothing from unsigned thought text, so unsigned thinking, and redacted
  thinking, are dropped);
- at most five stop sequences go to the API (its limit); the adapter applies
  the rest client-side.

``built.params`` (``RequestOptions.provider_params``): a key that names a
``GenerateContentConfig`` field, in snake_case or camelCase (``top_k``,
``safety_settings``, ``responseMimeType``, ``thinking_config``…), sets that
field and wins over the adapter's own; any other key is merged as it is into
the request's JSON body (``HttpOptions.extra_body``), e.g.
``{"generationConfig": {"responseLogprobs": true}}``.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote_to_bytes, urlparse

import pydantic
from google.genai import types

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
    describe_validation_error,
)

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..vocab.messages import ModelConfig

MAX_STOP_SEQUENCES = 5  # the API's limit
FALLBACK_IMAGE_TYPE = "image/jpeg"

_FIELDS = types.GenerateContentConfig.model_fields
_ALIASES = {info.alias: name for name, info in _FIELDS.items() if info.alias}


def server_stops(built: BuiltRequest) -> list[str]:
    return list(built.stop_sequences[:MAX_STOP_SEQUENCES])


def client_stops(built: BuiltRequest) -> list[str]:
    """What the adapter must watch for itself: the stops beyond the API's five,
    and the end-of-turn token."""
    stops = list(built.stop_sequences[MAX_STOP_SEQUENCES:])
    if built.end_of_turn and built.end_of_turn not in stops:
        stops.append(built.end_of_turn)
    return stops


def request_config(built: BuiltRequest, config: ModelConfig) -> types.GenerateContentConfig:
    """The ``GenerateContentConfig`` for one call; ``RequestError`` for params
    the SDK rejects."""
    fields: dict[str, Any] = {
        "max_output_tokens": config.max_tokens,
        # The adapter reads function calls itself and retries nothing on its own.
        "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
        "automatic_continuation": False,
    }
    if built.system:
        fields["system_instruction"] = built.system
    if config.temperature is not None:
        fields["temperature"] = config.temperature
    if built.stop_sequences:
        fields["stop_sequences"] = server_stops(built)
    if built.tools:
        declarations = [
            types.FunctionDeclaration(
                name=tool.name,
                description=tool.description or None,
                parameters_json_schema=tool.input_schema,
            )
            for tool in built.tools
        ]
        fields["tools"] = [types.Tool(function_declarations=declarations)]
    if built.mode == "chat" and config.thinking_budget is not None:
        fields["thinking_config"] = types.ThinkingConfig(
            include_thoughts=True, thinking_budget=config.thinking_budget
        )
    extra: dict[str, Any] = {}
    for key, value in built.params.items():
        name = key if key in _FIELDS else _ALIASES.get(key)
        if name is None:
            extra[key] = value
        else:
            fields[name] = value
    if extra:
        fields["http_options"] = types.HttpOptions(extra_body=extra)
    try:
        return types.GenerateContentConfig(**fields)
    except pydantic.ValidationError as exc:
        raise RequestError(f"params: {describe_validation_error(exc)}") from None


def request_contents(built: BuiltRequest) -> list[types.Content]:
    """``built.messages`` (and the prefill) as Gemini contents."""
    contents: list[types.Content] = []
    names: dict[str, str] = {}  # tool use id → tool name, for function responses
    for m, message in enumerate(built.messages):
        parts: list[types.Part] = []
        for c, block in enumerate(message.content):
            parts += _parts(block, names, f"messages[{m}].content[{c}]")
        if parts:  # the API rejects a content with no parts
            contents.append(
                types.Content(role="model" if message.role == "assistant" else "user", parts=parts)
            )
    if built.mode == "prefill" and built.prefill:
        prefill = types.Part(text=built.prefill)
        if contents and contents[-1].role == "model" and contents[-1].parts is not None:
            contents[-1].parts.append(prefill)
        else:
            contents.append(types.Content(role="model", parts=[prefill]))
    return contents


def call_contents(built: BuiltRequest) -> list[types.ContentDict]:
    """``request_contents`` as the dicts the SDK call is given: it validates and
    converts its input on every call, and from its own objects at twice the
    cost of from dicts (8.3 against 4.1 ms for a conversation of 21 messages,
    ``bench/request_cost.py``); the body on the wire is the same."""
    return [
        cast("types.ContentDict", content.model_dump(exclude_none=True))
        for content in request_contents(built)
    ]


def _parts(block: ContentBlock, names: dict[str, str], where: str) -> list[types.Part]:
    if isinstance(block, TextContent):
        return [types.Part(text=block.text)] if block.text else []  # the API rejects ""
    if isinstance(block, ImageContent):
        return [_image(block, where)]
    if isinstance(block, GeneratedImageContent):
        data = _b64decode(block.base64_data(where), f"{where}.data")
        return [types.Part(inline_data=types.Blob(mime_type=block.mime_type, data=data))]
    if isinstance(block, ThinkingContent):
        signature = _signature(block.signature)
        if signature is None:
            return []
        return [types.Part(text=block.thinking, thought=True, thought_signature=signature)]
    if isinstance(block, ToolUseContent):
        names[block.id] = block.name
        call = types.FunctionCall(id=block.id, name=block.name, args=dict(block.input))
        return [types.Part(function_call=call, thought_signature=_signature(block.signature))]
    if isinstance(block, ToolResultContent):
        name = names.get(block.tool_use_id)
        if name is None:
            raise RequestError(
                f"{where}.tool_use_id: {block.tool_use_id!r} answers no earlier tool_use"
            )
        key = "error" if block.is_error else "result"
        answer = types.FunctionResponse(
            id=block.tool_use_id, name=name, response={key: block.text()}
        )
        parts = [types.Part(function_response=answer)]
        if not isinstance(block.content, str):
            images = [item for item in block.content if isinstance(item, ImageContent)]
            parts += [_image(item, where) for item in images]
        return parts
    return []  # redacted thinking: Gemini has no such thing


def _image(block: ImageContent, where: str) -> types.Part:
    source = block.source
    if isinstance(source, Base64Source):
        data = _b64decode(source.data, f"{where}.source.data")
        return types.Part(inline_data=types.Blob(mime_type=source.media_type, data=data))
    if isinstance(source, BlobSource):
        raise unresolved(source, where)
    if source.url.startswith("data:"):
        header, _, payload = source.url[5:].partition(",")
        mime_type, _, encoding = header.partition(";")
        if encoding == "base64":
            data = _b64decode(payload, f"{where}.source.url")
        else:
            data = unquote_to_bytes(payload)
        blob = types.Blob(mime_type=mime_type or FALLBACK_IMAGE_TYPE, data=data)
        return types.Part(inline_data=blob)
    guessed, _ = mimetypes.guess_type(urlparse(source.url).path)
    mime_type = guessed if guessed and guessed.startswith("image/") else FALLBACK_IMAGE_TYPE
    return types.Part(file_data=types.FileData(file_uri=source.url, mime_type=mime_type))


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


def signature_text(signature: bytes | None) -> str | None:
    """A thought signature as the adapter reports it (standard base64)."""
    return base64.b64encode(signature).decode("ascii") if signature else None

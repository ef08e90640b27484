"""A ``BuiltRequest`` as the keyword arguments of ``messages.create``.

Kept apart from the adapter so the wire shape of each normalized block can be
read (and tested) in one place. Plain dicts are built rather than the SDK's
TypedDicts: the SDK sends them as they are, and the unions of its param types
add nothing here.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from ..storage.blob_resolve import unresolved
from ..vocab.blob_source import BlobSource
from ..vocab.messages import (
    Base64Source,
    ContentBlock,
    GeneratedImageContent,
    ImageContent,
    RedactedThinkingContent,
    RequestError,
    TextContent,
    ThinkingContent,
    ToolResultContent,
    ToolUseContent,
)

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..vocab.messages import ModelConfig


def request_params(built: BuiltRequest, config: ModelConfig) -> dict[str, Any]:
    """``messages.create`` keyword arguments (without ``stream``).

    Prefill mode appends the prefill as the final assistant message, right-stripped
    (the API rejects trailing whitespace), and never sends ``thinking`` (the API
    rejects thinking with a prefill). ``temperature`` and ``built.params`` go in
    ``extra_body``: anthropic 2.x's ``create`` has no ``temperature`` keyword.
    """
    params: dict[str, Any] = {
        "model": config.model,
        "max_tokens": config.max_tokens,
        "messages": wire_messages(built),
    }
    extra: dict[str, Any] = {}
    thinking = built.mode == "chat" and config.thinking_budget is not None
    if thinking:
        params["thinking"] = {"type": "enabled", "budget_tokens": config.thinking_budget}
    elif config.temperature is not None:
        extra["temperature"] = config.temperature  # the API takes none with thinking
    if built.system:
        if built.system_cache:
            params["system"] = [
                {"type": "text", "text": built.system, "cache_control": {"type": "ephemeral"}}
            ]
        else:
            params["system"] = built.system
    if built.stop_sequences:
        params["stop_sequences"] = list(built.stop_sequences)
    if built.tools:
        params["tools"] = [
            {"name": tool.name, "input_schema": tool.input_schema}
            | ({"description": tool.description} if tool.description else {})
            for tool in built.tools
        ]
    extra.update(built.params)
    if extra:
        params["extra_body"] = extra
    return params


class _BodyEncoder(json.JSONEncoder):
    """As the SDK writes a body (``anthropic._utils._json``): compact, UTF-8, no
    NaN, dates (a TOML value in ``[llm.params]``) in ISO form."""

    def default(self, o: Any) -> Any:
        if isinstance(o, date | datetime):
            return o.isoformat()
        return super().default(o)


_BODY = _BodyEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def streaming_body(params: dict[str, Any]) -> bytes:
    """The JSON body ``messages.create(stream=True, **params)`` sends, written
    once. ``create`` hands its body to the client, which copies the whole
    conversation (looking for file inputs, which ours never holds) before
    writing it: about 10 µs a message on every turn. Posted as content, the
    body is written and sent as it is (``extra_body`` merged in, as the SDK
    merges it)."""
    body = {key: value for key, value in params.items() if key != "extra_body"}
    body["stream"] = True
    body.update(params.get("extra_body", {}))
    return _BODY.encode(body).encode()


def wire_messages(built: BuiltRequest) -> list[dict[str, Any]]:
    """The messages in Anthropic's shape, with the prefill as the last assistant turn."""
    messages: list[dict[str, Any]] = []
    for m, message in enumerate(built.messages):
        content = [
            wire
            for c, block in enumerate(message.content)
            if (
                wire := _said_image(block)
                if message.role == "assistant" and isinstance(block, GeneratedImageContent)
                else wire_block(block, f"messages[{m}].content[{c}]")
            )
            is not None
        ]
        messages.append({"role": message.role, "content": content})
    prefill = (built.prefill or "").rstrip() if built.mode == "prefill" else ""
    if prefill:
        if messages and messages[-1]["role"] == "assistant":
            messages[-1]["content"].append({"type": "text", "text": prefill})
        else:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": prefill}]})
    return messages


def _said_image(image: GeneratedImageContent) -> dict[str, Any]:
    """An image the assistant generated, as the assistant's turn can hold it: the
    API takes images only from the user, so the model is told in words."""
    info = image.generation
    prompt = info.revised_prompt or info.prompt if info is not None else None
    return {
        "type": "text",
        "text": f"(image generated: {prompt})" if prompt else "(image generated)",
    }


def wire_block(block: ContentBlock, where: str) -> dict[str, Any] | None:
    """One normalized block in Anthropic's shape; None for an empty text block
    (the API rejects those). ``RequestError`` naming ``where`` for a block
    Anthropic cannot take."""
    if isinstance(block, TextContent):
        if not block.text:
            return None
        wire: dict[str, Any] = {"type": "text", "text": block.text}
        if block.cache_control is not None:
            wire["cache_control"] = block.cache_control.model_dump(exclude_none=True)
        return wire
    if isinstance(block, ImageContent):
        return _image(block, where)
    if isinstance(block, ThinkingContent):
        if block.signature is None:
            raise RequestError(
                f"{where}: an unsigned thinking block cannot be sent to Anthropic "
                "(set options.convert_unsigned_thinking_to_text)"
            )
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, RedactedThinkingContent):
        return {"type": "redacted_thinking", "data": block.data}
    if isinstance(block, ToolUseContent):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ToolResultContent):
        return _tool_result(block, where)
    if isinstance(block, GeneratedImageContent):
        source = {"type": "base64", "media_type": block.mime_type, "data": block.base64_data(where)}
        return {"type": "image", "source": source}
    raise RequestError(f"{where}: unsupported content block {type(block).__name__}")


def _image(block: ImageContent, where: str) -> dict[str, Any]:
    source = block.source
    if isinstance(source, Base64Source):
        wire = {"type": "base64", "media_type": source.media_type, "data": source.data}
        return {"type": "image", "source": wire}
    if isinstance(source, BlobSource):
        raise unresolved(source, where)
    if source.url.startswith("data:"):  # the API fetches http(s) URLs only
        head, _, data = source.url.partition(",")
        media_type = head[len("data:") :].split(";")[0]
        if ";base64" not in head or not media_type.startswith("image/") or not data:
            raise RequestError(f"{where}.source.url: expected a base64 image data URL")
        wire = {"type": "base64", "media_type": media_type, "data": data}
        return {"type": "image", "source": wire}
    return {"type": "image", "source": {"type": "url", "url": source.url}}


def _tool_result(block: ToolResultContent, where: str) -> dict[str, Any]:
    content: str | list[dict[str, Any]]
    if isinstance(block.content, str):
        content = block.content
    else:
        content = [
            part_wire
            for p, part in enumerate(block.content)
            if (part_wire := wire_block(part, f"{where}.content[{p}]")) is not None
        ]
    wire: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
    if content:
        wire["content"] = content
    if block.is_error:
        wire["is_error"] = True
    return wire

"""Request mapping for the OpenAI adapter: a ``BuiltRequest`` → the JSON body
of ``POST /chat/completions`` or ``POST /completions``.

Kept apart from the stream handling so each can be read (and tested) alone.
The mapping is the one every OpenAI-compatible server understands: string
content when a message is plain text, ``image_url`` parts only when there are
images, ``tool`` messages for tool results, and no thinking (OpenAI cannot take
reasoning back).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from ..formats.base import BuiltRequest, ProviderMessage
from ..storage.blob_resolve import unresolved
from ..vocab.blob_source import BlobSource
from ..vocab.messages import (
    GeneratedImageContent,
    ImageContent,
    ModelConfig,
    TextContent,
    ToolDefinition,
    ToolResultContent,
    ToolUseContent,
)

MAX_STOPS = 4  # the API rejects more; the rest are enforced client-side
# config.thinking_budget → reasoning_effort: the budget below which each level is chosen.
EFFORT_BELOW = (("low", 4096), ("medium", 16384))


def reasoning_effort(thinking_budget: int) -> str:
    """OpenAI takes an effort level, not a token budget: the nearest level."""
    return next((level for level, below in EFFORT_BELOW if thinking_budget < below), "high")


def token_field(base_url: str, override: str | None = None) -> str:
    """``max_completion_tokens`` for api.openai.com (reasoning models reject
    ``max_tokens``); ``max_tokens`` for other servers, which mostly know only it."""
    if override:
        return override
    host = urlsplit(base_url).hostname or ""
    return "max_completion_tokens" if host == "api.openai.com" else "max_tokens"


def chat_request(
    built: BuiltRequest, config: ModelConfig, *, max_tokens_field: str, streaming: bool
) -> dict[str, Any]:
    """The body of ``POST /chat/completions``."""
    messages: list[dict[str, Any]] = []
    if built.system:
        messages.append({"role": "system", "content": built.system})
    for message in built.messages:
        messages.extend(write_message(message))
    body: dict[str, Any] = {
        "model": config.model,
        "messages": messages,
        max_tokens_field: config.max_tokens,
    }
    if built.tools:
        body["tools"] = [tool_spec(tool) for tool in built.tools]
    if config.thinking_budget is not None:  # provider_params may still set it exactly
        body["reasoning_effort"] = reasoning_effort(config.thinking_budget)
    return _common(body, built, config, streaming)


def completion_request(
    built: BuiltRequest, config: ModelConfig, *, streaming: bool
) -> dict[str, Any]:
    """The body of the legacy ``POST /completions`` (prefill mode)."""
    prompt = built.prompt if built.prompt is not None else built.prefill or ""
    body: dict[str, Any] = {
        "model": config.model,
        "prompt": prompt,
        "max_tokens": config.max_tokens,
    }
    return _common(body, built, config, streaming)


def _common(
    body: dict[str, Any], built: BuiltRequest, config: ModelConfig, streaming: bool
) -> dict[str, Any]:
    if config.temperature is not None:
        body["temperature"] = config.temperature
    if built.stop_sequences:
        body["stop"] = list(built.stop_sequences[:MAX_STOPS])
    if streaming:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    body.update(built.params)  # provider_params win, as the SDK's extra_body would
    return body


def tool_spec(tool: ToolDefinition) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def write_message(message: ProviderMessage) -> list[dict[str, Any]]:
    """One normalized message as OpenAI messages (tool results become ``tool``
    messages, sent first as the API requires; images they carry follow in a
    user message, since a ``tool`` message takes text only)."""
    if message.role == "assistant":
        return _assistant(message)
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResultContent):
            content = block.text()
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": block.tool_use_id,
                    "content": f"Error: {content}" if block.is_error else content,
                }
            )
            if not isinstance(block.content, str):
                parts.extend(_image(p) for p in block.content if isinstance(p, ImageContent))
        elif isinstance(block, TextContent):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageContent | GeneratedImageContent):
            parts.append(_image(block))
    if parts:
        if all(part["type"] == "text" for part in parts):  # plain text: what every server takes
            out.append({"role": "user", "content": "".join(part["text"] for part in parts)})
        else:
            out.append({"role": "user", "content": parts})
    return out


def _assistant(message: ProviderMessage) -> list[dict[str, Any]]:
    text = "".join(b.text for b in message.content if isinstance(b, TextContent))
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(b.input)},
        }
        for b in message.content
        if isinstance(b, ToolUseContent)
    ]
    if not text and not calls:
        return []  # only thinking (or nothing): OpenAI cannot take it back
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
    return [out]


def _image(block: ImageContent | GeneratedImageContent) -> dict[str, Any]:
    if isinstance(block, GeneratedImageContent):
        url = f"data:{block.mime_type};base64,{block.base64_data('generated image')}"
    elif block.source.type == "base64":
        url = f"data:{block.source.media_type};base64,{block.source.data}"
    elif isinstance(block.source, BlobSource):
        raise unresolved(block.source, "image")
    else:
        url = block.source.url
    return {"type": "image_url", "image_url": {"url": url}}

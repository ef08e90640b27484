"""voice_membrane: make an LLM speak in real time.

The public API is importable from here (``from voice_membrane import Membrane``);
the folders below are the layers (docs/architecture.md). Names load on first
use, so ``import voice_membrane`` (and every ``voice-membrane`` command) does
not pay for the vendors' SDKs it does not touch.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it
_PUBLIC: dict[str, str] = {
    # the vocabulary
    **dict.fromkeys(("Block", "BlockComplete", "BlockStart", "Chunk", "ChunkMeta"), "vocab.events"),
    **dict.fromkeys(
        (
            "Base64Source",
            "ImageContent",
            "Message",
            "ModelConfig",
            "Request",
            "RequestError",
            "TextContent",
            "ThinkingContent",
            "ToolDefinition",
            "ToolResultContent",
            "ToolUseContent",
            "UrlSource",
        ),
        "vocab.messages",
    ),
    "BlobSource": "vocab.blob_source",
    "AudioChunk": "vocab.audio",
    # storage
    **dict.fromkeys(("BlobStore", "FileBlobStore", "MemoryBlobStore"), "storage.blobs"),
    # the sans-I/O cores
    **dict.fromkeys(("NativeBlockAssembler", "XmlStreamParser"), "parse"),
    **dict.fromkeys(
        ("PolicyContext", "StreamPolicy", "StreamState", "ToolAllowList"), "parse.policy"
    ),
    "PhraseGuard": "chunking.phrase_guard",
    **dict.fromkeys(("SpeechChunk", "SpeechChunker"), "chunking"),
    # request shapes and vendors' services
    **dict.fromkeys(
        (
            "AnthropicXmlFormatter",
            "ChatMLFormatter",
            "CompletionsFormatter",
            "Formatter",
            "GeminiPrefillFormatter",
            "NativeFormatter",
            "get_formatter",
        ),
        "formats",
    ),
    **dict.fromkeys(("LlmError", "ProviderError"), "vendors.errors"),
    "RetryPolicy": "vendors.retry",
    # engines
    "AnthropicProvider": "providers.anthropic",
    "OpenAIProvider": "providers.openai",
    "GeminiProvider": "providers.gemini",
    # replies
    "Membrane": "membrane.membrane",
    **dict.fromkeys(
        ("ImagePreview", "ReplyError", "ReplyResult", "Retrying", "UsageUpdate"), "membrane.reply"
    ),
    **dict.fromkeys(("ToolCall", "Toolbox", "tool_handler"), "membrane.tools"),
    **dict.fromkeys(("McpServer", "McpToolbox"), "membrane.tools_mcp"),
    # the streaming graph
    "Session": "pipeline.session",
    # telemetry
    "setup_tracing": "telemetry.setup",
}

__all__ = [
    "AnthropicProvider",
    "AnthropicXmlFormatter",
    "AudioChunk",
    "Base64Source",
    "BlobSource",
    "BlobStore",
    "Block",
    "BlockComplete",
    "BlockStart",
    "ChatMLFormatter",
    "Chunk",
    "ChunkMeta",
    "CompletionsFormatter",
    "FileBlobStore",
    "Formatter",
    "GeminiPrefillFormatter",
    "GeminiProvider",
    "ImageContent",
    "ImagePreview",
    "LlmError",
    "McpServer",
    "McpToolbox",
    "Membrane",
    "MemoryBlobStore",
    "Message",
    "ModelConfig",
    "NativeBlockAssembler",
    "NativeFormatter",
    "OpenAIProvider",
    "PhraseGuard",
    "PolicyContext",
    "ProviderError",
    "ReplyError",
    "ReplyResult",
    "Request",
    "RequestError",
    "RetryPolicy",
    "Retrying",
    "Session",
    "SpeechChunk",
    "SpeechChunker",
    "StreamPolicy",
    "StreamState",
    "TextContent",
    "ThinkingContent",
    "ToolAllowList",
    "ToolCall",
    "ToolDefinition",
    "ToolResultContent",
    "ToolUseContent",
    "Toolbox",
    "UrlSource",
    "UsageUpdate",
    "XmlStreamParser",
    "__version__",
    "get_formatter",
    "setup_tracing",
    "tool_handler",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'voice_membrane' has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # what type checkers and editors see
    from .chunking import SpeechChunk, SpeechChunker
    from .chunking.phrase_guard import PhraseGuard
    from .formats import (
        AnthropicXmlFormatter,
        ChatMLFormatter,
        CompletionsFormatter,
        Formatter,
        GeminiPrefillFormatter,
        NativeFormatter,
        get_formatter,
    )
    from .membrane.membrane import Membrane
    from .membrane.reply import ImagePreview, ReplyError, ReplyResult, Retrying, UsageUpdate
    from .membrane.tools import Toolbox, ToolCall, tool_handler
    from .membrane.tools_mcp import McpServer, McpToolbox
    from .parse import NativeBlockAssembler, XmlStreamParser
    from .parse.policy import PolicyContext, StreamPolicy, StreamState, ToolAllowList
    from .pipeline.session import Session
    from .providers.anthropic import AnthropicProvider
    from .providers.gemini import GeminiProvider
    from .providers.openai import OpenAIProvider
    from .storage.blobs import BlobStore, FileBlobStore, MemoryBlobStore
    from .telemetry.setup import setup_tracing
    from .vendors.errors import LlmError, ProviderError
    from .vendors.retry import RetryPolicy
    from .vocab.audio import AudioChunk
    from .vocab.blob_source import BlobSource
    from .vocab.events import Block, BlockComplete, BlockStart, Chunk, ChunkMeta
    from .vocab.messages import (
        Base64Source,
        ImageContent,
        Message,
        ModelConfig,
        Request,
        RequestError,
        TextContent,
        ThinkingContent,
        ToolDefinition,
        ToolResultContent,
        ToolUseContent,
        UrlSource,
    )

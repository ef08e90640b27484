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
import json
from typing import TYPE_CHECKING, Any, cast

import pydantic
from google.genai import types

from ..vocab.messages import RequestError, describe_validation_error
from .gemini_wire import wire_contents

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..vocab.messages import ModelConfig

MAX_STOP_SEQUENCES = 5  # the API's limit

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
    """``built.messages`` (and the prefill) as Gemini contents: the wire JSON
    (``gemini_wire``, one set of rules) read into the SDK's types."""
    return [types.Content.model_validate_json(json.dumps(c)) for c in wire_contents(built)]


def call_contents(built: BuiltRequest) -> list[types.ContentDict]:
    """``request_contents`` as the dicts the SDK call is given: it validates and
    converts its input on every call, and from its own objects at twice the
    cost of from dicts (8.3 against 4.1 ms for a conversation of 21 messages,
    ``bench/request_cost.py``); the body on the wire is the same."""
    return [
        cast("types.ContentDict", content.model_dump(exclude_none=True))
        for content in request_contents(built)
    ]


def signature_text(signature: bytes | None) -> str | None:
    """A thought signature as the adapter reports it (standard base64)."""
    return base64.b64encode(signature).decode("ascii") if signature else None

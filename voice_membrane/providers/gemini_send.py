"""A Gemini call (streamed, or whole) whose conversation was written as wire
JSON here (``gemini_wire``), sent through the SDK's own HTTP client.

google-genai's public call validates and converts the whole conversation on
every turn (~0.3 ms a message); it has no documented way to send a body built
elsewhere. So this does what its ``_generate_content_stream`` (and
``_generate_content``) do around the conversion: the SDK still converts the
config (small, and its field rules are its own), builds the path, sends
through its API client (auth, retries, errors) and reads each chunk into its
response type; only ``contents`` is ours. It reaches into the SDK's private
module (written against google-genai 3.6.1); if any piece is missing, or the
client speaks to Vertex AI, ``available`` says no and the adapter makes the
public call, as before.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from google.genai import _common, types
from google.genai import models as sdk_models

from .gemini_wire import wire_contents

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest

_NEEDED = ("_GenerateContentParameters_to_mldev", "_GenerateContentResponse_from_mldev")
# a conversation the SDK's converter accepts (it requires one); replaced by ours
_PLACEHOLDER = [types.Content(role="user", parts=[types.Part(text=".")])]


def available(models: Any) -> bool:
    """Whether this path can send for ``models`` (the client's ``aio.models``)."""
    api = getattr(models, "_api_client", None)
    return (
        api is not None
        and hasattr(api, "vertexai")
        and not api.vertexai  # (None or False: the Gemini API)
        and hasattr(api, "async_request_streamed")
        and hasattr(api, "async_request")
        and hasattr(api, "_verify_response")
        and hasattr(types, "_GenerateContentParameters")
        and hasattr(types.GenerateContentResponse, "_from_response")
        and all(hasattr(sdk_models, name) for name in _NEEDED)
    )


async def stream(
    models: Any, model: str, built: BuiltRequest, config: types.GenerateContentConfig
) -> AsyncGenerator[types.GenerateContentResponse, None]:
    """The call's chunks, as ``models.generate_content_stream`` yields them."""
    api = models._api_client
    path, body, parameters = _request(api, model, built, config, "streamGenerateContent?alt=sse")
    responses = await api.async_request_streamed("post", path, body, config.http_options)
    try:
        async for response in responses:
            yield _read(api, response, parameters, config)
    finally:
        close = getattr(responses, "aclose", None)
        if close is not None:
            await close()


async def generate(
    models: Any, model: str, built: BuiltRequest, config: types.GenerateContentConfig
) -> types.GenerateContentResponse:
    """The whole reply, as ``models.generate_content`` returns it."""
    api = models._api_client
    path, body, parameters = _request(api, model, built, config, "generateContent")
    response = await api.async_request("post", path, body, config.http_options)
    return _read(api, response, parameters, config)


def _request(
    api: Any, model: str, built: BuiltRequest, config: types.GenerateContentConfig, method: str
) -> tuple[str, dict[str, Any], Any]:
    """The call's URL path (the model's, then ``method``), its body, and the
    SDK's parameters object (which reading a response takes)."""
    path, request, parameters = _converted(api, model, config)
    model_path, _, query = path.partition("?")
    path = f"{model_path}:{method}"
    if query:
        path = f"{path}{'&' if '?' in path else '?'}{query}"
    return path, {"contents": wire_contents(built), **json.loads(request)}, parameters


def _read(
    api: Any, response: Any, parameters: Any, config: types.GenerateContentConfig
) -> types.GenerateContentResponse:
    """One response (a chunk) into the SDK's type, as its own call reads it."""
    raw = json.loads(response.body) if response.body else {}
    raw = sdk_models._GenerateContentResponse_from_mldev(raw, None, parameters)
    read = {
        "response_schema": config.response_schema,
        "response_json_schema": config.response_json_schema,
        "include_all_fields": getattr(config, "include_all_fields", None),
    }
    chunk = types.GenerateContentResponse._from_response(response=raw, kwargs={"config": read})
    chunk.sdk_http_response = types.HttpResponse(headers=response.headers)
    api._verify_response(chunk)
    return chunk


# A session's turns share their config (system prompt, tools, stops, params):
# the SDK's conversion of it (~1 ms, the largest fixed part) is kept, as JSON
# (the SDK may merge an extra body into what it sends: never into the kept one).
# (the model's path and any query, the body's JSON but its contents, the call)
_Converted = tuple[str, str, Any]
_converted_by_config: dict[tuple[str, str], _Converted] = {}
_KEPT = 64


def _converted(api: Any, model: str, config: types.GenerateContentConfig) -> _Converted:
    key = (model, config.model_dump_json(exclude_none=True))
    kept = _converted_by_config.get(key)
    if kept is not None:
        return kept
    parameters = types._GenerateContentParameters(model=model, contents=_PLACEHOLDER, config=config)
    request = sdk_models._GenerateContentParameters_to_mldev(api, parameters, None, parameters)
    url, query = request.pop("_url", None), request.pop("_query", None)
    for of_the_call in ("config", "contents"):  # (contents: the placeholder's)
        request.pop(of_the_call, None)
    path = "{model}".format_map(url) if url else model
    if query:  # (none today: the query goes after the method's own)
        path = f"{path}?{urlencode(query)}"
    request = _common.encode_unserializable_types(_common.convert_to_dict(request))
    if len(_converted_by_config) >= _KEPT:
        _converted_by_config.clear()
    kept = _converted_by_config[key] = (path, json.dumps(request), parameters)
    return kept

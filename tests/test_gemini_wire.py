"""The Gemini conversation written as wire JSON (providers/gemini_wire.py) and
sent through the SDK's client (providers/gemini_send.py): for any conversation
it is the body google-genai writes from its own objects, the public call is
still made where this path cannot be, and both read the same reply."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from google import genai
from google.genai import _common, types
from google.genai import models as sdk_models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_provider_gemini import rich_request

from voice_membrane.formats.base import BuiltRequest, ProviderMessage
from voice_membrane.providers import gemini_send
from voice_membrane.providers.gemini import GeminiProvider
from voice_membrane.providers.gemini_wire import wire_contents
from voice_membrane.testing.fake_gemini import FakeGemini
from voice_membrane.testing.script import ScriptedReply, thinking, tool_use
from voice_membrane.vocab.messages import (
    Base64Source,
    ContentBlock,
    ImageContent,
    ModelConfig,
    TextContent,
    ThinkingContent,
    ToolResultContent,
    ToolUseContent,
    UrlSource,
)

FAKE = FakeGemini  # conftest: the module's `server`, reset as `fake`
CONFIG = ModelConfig(model="gemini-test", max_tokens=500)
SIG = base64.b64encode(b"sig-fake").decode()
PNG = base64.b64encode(b"\x89PNG fake").decode()
CLIENT = genai.Client(api_key="fake-key")


def _sdk_part(block: ContentBlock, names: dict[str, str]) -> list[types.Part]:
    """The reference: each block as the SDK's own objects, the plain way."""
    if isinstance(block, TextContent):
        return [types.Part(text=block.text)] if block.text else []
    if isinstance(block, ImageContent):
        source = block.source
        if isinstance(source, Base64Source):
            blob = types.Blob(mime_type=source.media_type, data=base64.b64decode(source.data))
            return [types.Part(inline_data=blob)]
        assert isinstance(source, UrlSource)
        return [types.Part(file_data=types.FileData(file_uri=source.url, mime_type="image/png"))]
    if isinstance(block, ThinkingContent):
        if block.signature is None:
            return []
        signature = base64.b64decode(block.signature)
        return [types.Part(text=block.thinking, thought=True, thought_signature=signature)]
    if isinstance(block, ToolUseContent):
        names[block.id] = block.name
        call = types.FunctionCall(id=block.id, name=block.name, args=dict(block.input))
        signature = None if block.signature is None else base64.b64decode(block.signature)
        return [types.Part(function_call=call, thought_signature=signature)]
    assert isinstance(block, ToolResultContent)
    key = "error" if block.is_error else "result"
    answer = types.FunctionResponse(
        id=block.tool_use_id, name=names[block.tool_use_id], response={key: block.text()}
    )
    return [types.Part(function_response=answer)]


def _sdk_contents(built: BuiltRequest) -> list[Any]:
    """What google-genai puts on the wire for those objects."""
    names: dict[str, str] = {}
    contents = []
    for message in built.messages:
        parts = [part for block in message.content for part in _sdk_part(block, names)]
        if parts:
            role = "model" if message.role == "assistant" else "user"
            contents.append(types.Content(role=role, parts=parts))
    if built.mode == "prefill" and built.prefill:
        if contents and contents[-1].role == "model" and contents[-1].parts is not None:
            contents[-1].parts.append(types.Part(text=built.prefill))
        else:
            contents.append(types.Content(role="model", parts=[types.Part(text=built.prefill)]))
    if not contents:
        return []  # (the SDK refuses to send none; the API would too)
    api = CLIENT.aio.models._api_client
    parameters = types._GenerateContentParameters(model="m", contents=contents)
    request = sdk_models._GenerateContentParameters_to_mldev(api, parameters, None, parameters)
    body = _common.encode_unserializable_types(_common.convert_to_dict(request))
    return list(body["contents"])


_text = st.text(max_size=12)
_blocks = st.one_of(
    _text.map(lambda t: TextContent(text=t)),
    st.just(ImageContent(source=Base64Source(media_type="image/png", data=PNG))),
    st.just(ImageContent(source=UrlSource(url="https://example.com/a.png"))),
    st.builds(
        lambda t, signed: ThinkingContent(thinking=t, signature=SIG if signed else None),
        _text,
        st.booleans(),
    ),
)


@st.composite
def _conversations(draw: st.DrawFn) -> BuiltRequest:
    messages = []
    for m in range(draw(st.integers(1, 6))):
        role = "user" if m % 2 == 0 else "assistant"
        content: list[ContentBlock] = draw(st.lists(_blocks, max_size=3))
        if role == "assistant" and draw(st.booleans()):
            signed = draw(st.booleans())
            content.append(
                ToolUseContent(
                    id=f"c{m}",
                    name="look",
                    input={"q": draw(_text)},
                    signature=SIG if signed else None,
                )
            )
            messages.append(ProviderMessage(role, content))
            error = draw(st.booleans())
            answer = ToolResultContent(tool_use_id=f"c{m}", content=draw(_text), is_error=error)
            messages.append(ProviderMessage("user", [answer]))
            continue
        messages.append(ProviderMessage(role, content))
    prefill = draw(st.one_of(st.none(), _text))
    mode = "prefill" if prefill is not None else "chat"
    return BuiltRequest(mode=mode, messages=messages, prefill=prefill or "")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_conversations())
def test_the_wire_contents_are_what_the_sdk_writes_from_its_own_objects(
    built: BuiltRequest,
) -> None:
    assert wire_contents(built) == _sdk_contents(built)


def test_the_path_stands_down_where_it_cannot_send() -> None:
    assert gemini_send.available(CLIENT.aio.models)

    class Vertex:
        class _api_client:
            vertexai = True

    assert not gemini_send.available(Vertex())
    assert not gemini_send.available(object())


pytestmark = pytest.mark.anyio


@pytest.fixture
async def provider(fake: FakeGemini) -> AsyncIterator[GeminiProvider]:
    gemini = GeminiProvider(api_key="fake-key", base_url=fake.base_url)
    await gemini.start()
    yield gemini
    await gemini.aclose()


@pytest.mark.parametrize("streaming", [True, False])
async def test_the_public_call_where_this_path_cannot_sends_and_reads_the_same(
    fake: FakeGemini, provider: GeminiProvider, monkeypatch: pytest.MonkeyPatch, streaming: bool
) -> None:
    reply = ScriptedReply.of(
        thinking("Hm."), "Sunny ", tool_use("get_time", {}, id="t1"), delta_chars=3
    )
    fake.add(reply)
    fake.add(reply)
    built = rich_request()
    fast = [item async for item in provider.stream(built, CONFIG, streaming=streaming)]
    monkeypatch.setattr(gemini_send, "available", lambda models: False)
    public = [item async for item in provider.stream(built, CONFIG, streaming=streaming)]
    ours, sdks = (request.body for request in fake.requests)
    assert ours == sdks
    assert ours["labels_not_a_field"] == {"x": 1}  # the config's extra body, sent
    assert len(ours["contents"]) == 3 and "tools" in ours
    assert fast == public

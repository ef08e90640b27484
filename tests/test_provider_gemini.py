"""GeminiProvider against FakeGemini: native blocks (hidden thoughts, whole function
calls, thought signatures), usage and stop reasons, the request it sends,
prefill mode with the end-of-turn token, errors, and cancellation."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import replace
from typing import Any

import anyio
import httpx2
import pytest
from google import genai
from google.genai import errors, types
from native_events import assemble, blocks

from voice_membrane.formats.base import BuiltRequest, ProviderMessage
from voice_membrane.providers.gemini import GeminiProvider, provider_error
from voice_membrane.providers.gemini_read import ChunkReader
from voice_membrane.providers.gemini_request import request_config, request_contents
from voice_membrane.testing.fake_gemini import FakeGemini
from voice_membrane.testing.script import Fault, ScriptedReply, thinking, tool_use
from voice_membrane.vendors.errors import ProviderError
from voice_membrane.vocab.events import BlockComplete, Chunk, merge_adjacent_chunks
from voice_membrane.vocab.messages import (
    Base64Source,
    ImageContent,
    ModelConfig,
    RedactedThinkingContent,
    TextContent,
    ThinkingContent,
    ToolDefinition,
    ToolResultContent,
    ToolUseContent,
)
from voice_membrane.vocab.provider_output import (
    NativeDelta,
    NativeStart,
    NativeStop,
    ProviderOutput,
    StopInfo,
    TextDelta,
    Usage,
)

pytestmark = pytest.mark.anyio
FAKE = FakeGemini  # conftest: the module's `server`, reset as `fake`
CONFIG = ModelConfig(model="gemini-test", max_tokens=500)
HI = [ProviderMessage("user", [TextContent(text="Hi")])]
CHAT = BuiltRequest(mode="chat", messages=HI)
SIG = base64.b64encode(b"sig-fake").decode()
TOOLS_REPLY = ScriptedReply.of(
    thinking("Two cities."),
    "Checking.",
    tool_use("get_weather", {"city": "Paris"}, id="call-1"),
    tool_use("get_weather", {"city": "Rome", "days": 2}),
    delta_chars=4,
)


@pytest.fixture
async def provider(fake: FakeGemini) -> AsyncIterator[GeminiProvider]:
    gemini = GeminiProvider(api_key="fake-key", base_url=fake.base_url)
    await gemini.start()
    yield gemini
    await gemini.aclose()


async def collect(
    provider: GeminiProvider,
    built: BuiltRequest = CHAT,
    *,
    streaming: bool = True,
    config: ModelConfig = CONFIG,
) -> list[ProviderOutput]:
    return [item async for item in provider.stream(built, config, streaming=streaming)]


async def wait_for(condition: Any, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await anyio.sleep(0.01)
    return bool(condition())


# ---------------------------------------------------------------- chat mode


async def test_text(fake: FakeGemini, provider: GeminiProvider) -> None:
    fake.add(ScriptedReply.of("Hello there.", delta_chars=5))
    items = await collect(provider)
    assert items == [
        NativeStart("text"),
        NativeDelta("Hello"),
        NativeDelta(" ther"),
        NativeDelta("e."),
        NativeStop(),
        Usage(input_tokens=12, output_tokens=3),
        StopInfo("end_turn", raw="STOP"),
    ]


async def test_thoughts_are_a_hidden_thinking_block(
    fake: FakeGemini, provider: GeminiProvider
) -> None:
    fake.add(ScriptedReply.of(thinking("Hmm, greet."), "Hi!", delta_chars=6))
    items = await collect(provider)
    assert items[:5] == [
        NativeStart("thinking"),
        NativeDelta("Hmm, g"),
        NativeDelta("reet."),
        NativeStop(signature=SIG),  # Gemini signs the part after the thoughts
        NativeStart("text"),
    ]
    assert items[-2:] == [
        Usage(input_tokens=12, output_tokens=1, thinking_tokens=2),
        StopInfo("end_turn", raw="STOP"),
    ]
    thought, said = blocks(items)
    assert (thought.type, thought.content, thought.signature) == ("thinking", "Hmm, greet.", SIG)
    assert (said.type, said.content) == ("text", "Hi!")
    chunks = [e for e in assemble(items) if isinstance(e, Chunk)]
    assert [c.meta.visible for c in chunks] == [False, False, True]


async def test_two_function_calls(fake: FakeGemini, provider: GeminiProvider) -> None:
    fake.add(TOOLS_REPLY)
    items = await collect(provider)
    assert items[-1] == StopInfo("tool_use", raw="STOP")  # Gemini says STOP after calls
    thought, said, first, second = blocks(items)
    assert (thought.type, thought.content, thought.signature) == ("thinking", "Two cities.", SIG)
    assert said.content == "Checking."
    assert (first.tool_id, first.tool_name) == ("call-1", "get_weather")
    assert first.input == {"city": "Paris"}
    assert second.tool_id is not None and second.tool_id.startswith("gemini_call_")
    assert second.input == {"city": "Rome", "days": 2}
    assert first.signature is None and second.signature is None
    ids = {b.tool_id for b in blocks(await collect_again(fake, provider))}
    assert second.tool_id not in ids  # generated ids never repeat within a provider


async def test_a_signature_on_a_call_stays_with_the_call(
    fake: FakeGemini, provider: GeminiProvider
) -> None:
    fake.add(ScriptedReply.of(thinking("Look it up."), tool_use("get_weather", {"city": "Oslo"})))
    thought, call = blocks(await collect(provider))
    assert thought.signature is None
    assert (call.tool_name, call.signature) == ("get_weather", SIG)  # sent back on the call


async def collect_again(fake: FakeGemini, provider: GeminiProvider) -> list[ProviderOutput]:
    fake.add(TOOLS_REPLY)
    return await collect(provider)


async def test_max_tokens(fake: FakeGemini, provider: GeminiProvider) -> None:
    fake.add(ScriptedReply.of("Cut sh", stop_reason="max_tokens"))
    assert (await collect(provider))[-1] == StopInfo("max_tokens", raw="MAX_TOKENS")


async def test_non_streaming_gives_the_same_blocks(
    fake: FakeGemini, provider: GeminiProvider
) -> None:
    fake.add(TOOLS_REPLY, TOOLS_REPLY)
    streamed = await collect(provider)
    whole = await collect(provider, streaming=False)
    assert fake.requests[1].path.endswith(":generateContent")

    def logical(items: list[ProviderOutput]) -> list[Any]:
        """Merged events with the generated tool ids (which differ per call) left out."""
        out: list[Any] = []
        for event in merge_adjacent_chunks(assemble(items)):
            if isinstance(event, Chunk):
                if event.meta.tool_call_part != "id":
                    out.append((event.text, replace(event.meta, tool_id=None)))
            elif isinstance(event, BlockComplete):
                out.append((event.index, replace(event.block, tool_id=None)))
            else:
                out.append(event)
        return out

    assert logical(whole) == logical(streamed)
    assert whole[-2:] == streamed[-2:]  # usage and stop


# ---------------------------------------------------------------- the request


def rich_request() -> BuiltRequest:
    """Text, an image, signed and unsigned thinking, calls and their results,
    tools, more stops than the API takes, and params."""
    png = base64.b64encode(b"\x89PNG fake").decode()
    return BuiltRequest(
        mode="chat",
        system="Be brief.",
        messages=[
            ProviderMessage(
                "user",
                [
                    TextContent(text="Weather here?"),
                    ImageContent(source=Base64Source(media_type="image/png", data=png)),
                ],
            ),
            ProviderMessage(
                "assistant",
                [
                    ThinkingContent(thinking="unsigned: dropped"),
                    ThinkingContent(thinking="Signed.", signature=SIG),
                    RedactedThinkingContent(data="opaque"),
                    ToolUseContent(
                        id="c1", name="get_weather", input={"city": "Oslo"}, signature=SIG
                    ),
                    ToolUseContent(id="c2", name="get_time", input={}),
                ],
            ),
            ProviderMessage(
                "user",
                [
                    ToolResultContent(tool_use_id="c1", content="Sunny"),
                    ToolResultContent(tool_use_id="c2", content="no clock", is_error=True),
                ],
            ),
        ],
        tools=[
            ToolDefinition(
                name="get_weather",
                description="Weather by city.",
                input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
            ),
            ToolDefinition(name="get_time"),
        ],
        stop_sequences=["\nUser:", "A", "B", "C", "D", "E", "F"],
        params={"top_k": 7, "responseMimeType": "text/plain", "labels_not_a_field": {"x": 1}},
    )


RICH_CONFIG = CONFIG.model_copy(update={"temperature": 0.3, "thinking_budget": 2048})


async def test_request_mapping(fake: FakeGemini, provider: GeminiProvider) -> None:
    fake.add(ScriptedReply.of("Sunny in Oslo."))
    await collect(provider, rich_request(), config=RICH_CONFIG)
    body = fake.requests[0].body
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    user, model, results = body["contents"]
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert user["parts"][0] == {"text": "Weather here?"}
    inline = user["parts"][1]["inlineData"]
    assert inline["mime_type"] == "image/png"
    assert base64.urlsafe_b64decode(inline["data"]) == b"\x89PNG fake"
    thought, call, call2 = model["parts"]
    assert thought["text"] == "Signed." and thought["thought"] is True
    assert base64.urlsafe_b64decode(thought["thoughtSignature"]) == b"sig-fake"
    assert call["functionCall"] == {"id": "c1", "name": "get_weather", "args": {"city": "Oslo"}}
    assert base64.urlsafe_b64decode(call["thoughtSignature"]) == b"sig-fake"
    assert "thoughtSignature" not in call2
    answers = [part["functionResponse"] for part in results["parts"]]
    assert answers == [
        {"id": "c1", "name": "get_weather", "response": {"result": "Sunny"}},
        {"id": "c2", "name": "get_time", "response": {"error": "no clock"}},
    ]
    declarations = body["tools"][0]["functionDeclarations"]
    assert declarations[0] == {
        "name": "get_weather",
        "description": "Weather by city.",
        "parameters_json_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    assert declarations[1]["name"] == "get_time" and "description" not in declarations[1]
    generation = body["generationConfig"]
    assert generation["stopSequences"] == ["\nUser:", "A", "B", "C", "D"]  # the API's five
    assert generation["thinkingConfig"] == {"include_thoughts": True, "thinking_budget": 2048}
    assert generation["maxOutputTokens"] == 500 and generation["temperature"] == 0.3
    assert generation["topK"] == 7 and generation["responseMimeType"] == "text/plain"
    assert body["labels_not_a_field"] == {"x": 1}  # unknown params go into the body as they are


@pytest.mark.parametrize("streaming", [True, False])
async def test_the_body_on_the_wire_is_what_the_sdks_own_objects_send(
    fake: FakeGemini, provider: GeminiProvider, streaming: bool
) -> None:
    """The adapter hands the SDK dicts (cheaper for it to take): the server
    receives what the SDK sends when given its own objects."""
    built = rich_request()
    fake.add(ScriptedReply.of("Sunny."))
    fake.add(ScriptedReply.of("Sunny."))
    await collect(provider, built, config=RICH_CONFIG, streaming=streaming)
    client = genai.Client(
        api_key="fake-key", http_options=types.HttpOptions(base_url=fake.base_url)
    )
    objects = request_contents(built)
    config = request_config(built, RICH_CONFIG)
    models = client.aio.models
    if streaming:
        stream = await models.generate_content_stream(
            model=RICH_CONFIG.model, contents=objects, config=config
        )
        _ = [chunk async for chunk in stream]
    else:
        await models.generate_content(model=RICH_CONFIG.model, contents=objects, config=config)
    ours, sdks = (request.body for request in fake.requests)
    assert ours == sdks


async def test_stops_beyond_five_are_applied_client_side(
    fake: FakeGemini, provider: GeminiProvider
) -> None:
    built = BuiltRequest(mode="chat", messages=HI, stop_sequences=["1", "2", "3", "4", "5", "END"])
    fake.add(ScriptedReply.of("Say this. END and not this.", delta_chars=3))
    items = await collect(provider, built)
    assert "".join(i.text for i in items if isinstance(i, NativeDelta)) == "Say this. "
    assert items[-1] == StopInfo("stop_sequence", "END")
    assert NativeStop() in items


# ---------------------------------------------------------------- prefill mode


def prefill(**fields: Any) -> BuiltRequest:
    return BuiltRequest(
        mode="prefill",
        messages=HI,
        prefill="Alice: Hi<|eot|>Bob:",
        stop_sequences=["<|eot|>"],
        end_of_turn="<|eot|>",
        **fields,
    )


async def test_prefill_end_of_turn_is_stripped_and_ends_the_reply(
    fake: FakeGemini, provider: GeminiProvider
) -> None:
    rest = "Alice: more" + " filler" * 40
    fake.add(ScriptedReply.of(f" Hello there.<|eot|>{rest}", delta_chars=2, delta_delay_s=0.005))
    items = await collect(provider, prefill())
    assert all(isinstance(i, TextDelta | Usage | StopInfo) for i in items)
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == " Hello there."
    assert items[-1] == StopInfo("end_turn", raw="<|eot|>")
    body = fake.requests[0].body
    assert body["contents"][-1] == {"role": "model", "parts": [{"text": "Alice: Hi<|eot|>Bob:"}]}
    assert body["generationConfig"]["stopSequences"] == ["<|eot|>"]
    assert "thinkingConfig" not in body["generationConfig"]
    assert await wait_for(lambda: fake.cancelled_streams == 1)  # the rest was not read


async def test_prefill_thoughts_are_wrapped_for_the_parser(
    fake: FakeGemini, provider: GeminiProvider
) -> None:
    fake.add(ScriptedReply.of(thinking("Plan."), " Hi.", delta_chars=3))
    items = await collect(provider, prefill())
    text = "".join(i.text for i in items if isinstance(i, TextDelta))
    assert text == "<thinking>Plan.</thinking> Hi."
    assert items[-1] == StopInfo("end_turn", raw="STOP")


# ---------------------------------------------------------------- errors


async def test_rate_limit_with_retry_after_makes_one_request(
    fake: FakeGemini, provider: GeminiProvider
) -> None:
    fake.add(ScriptedReply.http_error(429, retry_after=0.5, message="quota"))
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    error = caught.value
    assert (error.provider, error.kind, error.status, error.retry_after_s) == (
        "gemini",
        "rate_limit",
        429,
        0.5,
    )
    assert "quota" in str(error) and error.retryable
    assert len(fake.requests) == 1  # the SDK's retries are off


@pytest.mark.parametrize(
    ("status", "kind"), [(400, "bad_request"), (403, "auth"), (500, "server"), (503, "overloaded")]
)
async def test_http_errors(
    fake: FakeGemini, provider: GeminiProvider, status: int, kind: str
) -> None:
    fake.add(ScriptedReply.http_error(status))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, streaming=False)
    assert (caught.value.kind, caught.value.status) == (kind, status)


async def test_error_event_after_three_deltas(fake: FakeGemini, provider: GeminiProvider) -> None:
    fake.add(ScriptedReply.of("abcdefghij", delta_chars=2, fault=Fault("error_event", 3, 503)))
    items: list[ProviderOutput] = []
    with pytest.raises(ProviderError) as caught:
        async for item in provider.stream(CHAT, CONFIG):
            items.append(item)
    assert items == [NativeStart("text"), NativeDelta("ab"), NativeDelta("cd"), NativeDelta("ef")]
    assert caught.value.kind == "overloaded" and "UNAVAILABLE" in str(caught.value)


async def test_error_event_with_a_client_code_is_a_stream_error(
    fake: FakeGemini, provider: GeminiProvider
) -> None:
    fake.add(ScriptedReply.of("abcd", delta_chars=2, fault=Fault("error_event", 1, 400)))
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.kind == "stream" and not caught.value.retryable


async def test_malformed_line(fake: FakeGemini, provider: GeminiProvider) -> None:
    fake.add(ScriptedReply.of("abcdef", delta_chars=2, fault=Fault("malformed", 2)))
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.kind == "stream" and "not JSON" in str(caught.value)


async def test_malformed_whole_response(fake: FakeGemini, provider: GeminiProvider) -> None:
    fake.add(ScriptedReply.of("abcdef", fault=Fault("malformed")))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, streaming=False)
    assert caught.value.kind == "stream" and "not JSON" in str(caught.value)


@pytest.mark.parametrize("streaming", [True, False])
async def test_dropped_connection(
    fake: FakeGemini, provider: GeminiProvider, streaming: bool
) -> None:
    fake.add(ScriptedReply.of("abcdef", delta_chars=2, fault=Fault("drop", 2)))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, streaming=streaming)
    assert caught.value.kind == "connection"


async def test_connection_refused_and_timeout(fake: FakeGemini) -> None:
    with socket_port() as port:
        refused = GeminiProvider(api_key="k", base_url=f"http://127.0.0.1:{port}")
        with pytest.raises(ProviderError) as caught:
            await collect(refused)
        await refused.aclose()
    assert caught.value.kind == "connection"
    fake.add(ScriptedReply.of("late", ttft_s=1.0))
    slow = GeminiProvider(api_key="k", base_url=fake.base_url, timeout_s=0.2)
    with pytest.raises(ProviderError) as caught:
        await collect(slow)
    await slow.aclose()
    assert caught.value.kind == "timeout"


def socket_port() -> Any:
    """A port nothing listens on (bound, never listening, while in use)."""
    import contextlib
    import socket

    @contextlib.contextmanager
    def bound() -> Iterator[int]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            yield sock.getsockname()[1]

    return bound()


async def test_missing_key_is_an_auth_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)
    provider = GeminiProvider(base_url="http://127.0.0.1:9")
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.kind == "auth" and "GEMINI_API_KEY" in str(caught.value)


def test_retry_info_detail_when_there_is_no_header() -> None:
    details = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "quota",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}],
        }
    }
    error = provider_error(errors.ClientError(429, details, httpx2.Response(429)))
    assert error is not None and (error.kind, error.retry_after_s) == ("rate_limit", 7.0)


def test_blocked_prompt_is_a_refusal() -> None:
    reader = ChunkReader(False, [], None, iter(range(1, 9)))
    response = types.GenerateContentResponse._from_response(
        response={"promptFeedback": {"blockReason": "SAFETY"}}, kwargs={}
    )
    assert reader.read(response) == []
    assert reader.end(complete=False) == [StopInfo("refusal", raw="SAFETY")]


# ---------------------------------------------------------------- cancellation


async def test_closing_the_stream_closes_the_response(
    fake: FakeGemini, provider: GeminiProvider
) -> None:
    fake.add(ScriptedReply.of("x" * 200, delta_chars=1, delta_delay_s=0.01))
    async with aclosing(provider.stream(CHAT, CONFIG)) as items:
        seen = 0
        async for _ in items:
            seen += 1
            if seen == 3:
                break
    assert await wait_for(lambda: fake.cancelled_streams == 1)
    fake.add(ScriptedReply.of("Still usable."))
    assert blocks(await collect(provider))[0].content == "Still usable."


async def test_cancelling_the_consumer_closes_the_response(
    fake: FakeGemini, provider: GeminiProvider
) -> None:
    fake.add(ScriptedReply.of("x" * 200, delta_chars=1, delta_delay_s=0.01))
    with anyio.move_on_after(0.15):
        await collect(provider)
    assert await wait_for(lambda: fake.cancelled_streams == 1)


def test_image_urls_are_not_fetched() -> None:
    from voice_membrane.providers.gemini_request import request_contents
    from voice_membrane.vocab.messages import UrlSource

    dot = base64.b64encode(b"GIF89a").decode()
    built = BuiltRequest(
        mode="chat",
        messages=[
            ProviderMessage(
                "user",
                [
                    ImageContent(source=UrlSource(url="https://example.com/a/cat.png?x=1")),
                    ImageContent(source=UrlSource(url="https://example.com/photo")),
                    ImageContent(source=UrlSource(url=f"data:image/gif;base64,{dot}")),
                ],
            )
        ],
    )
    by_url, unknown, inline = request_contents(built)[0].parts or []
    assert by_url.file_data is not None and by_url.file_data.mime_type == "image/png"
    assert by_url.file_data.file_uri == "https://example.com/a/cat.png?x=1"
    assert unknown.file_data is not None and unknown.file_data.mime_type == "image/jpeg"
    assert inline.inline_data is not None and inline.inline_data.data == b"GIF89a"
    assert inline.inline_data.mime_type == "image/gif"

"""FakeGemini speaks the real generateContent protocol: the official google-genai
SDK parses its streams and whole responses, and sees its errors as it would the
real API's."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest
from google import genai
from google.genai import errors, types

from voice_membrane.testing.fake_gemini import FakeGemini
from voice_membrane.testing.script import (
    Fault,
    ScriptedReply,
    redacted_thinking,
    thinking,
    tool_use,
)

pytestmark = pytest.mark.anyio
FAKE = FakeGemini  # conftest: the module's `server`, reset as `fake`
REPLY = ScriptedReply.of(
    thinking("The user greets.", signature="sig-1"),
    redacted_thinking("opaque=="),
    "Hello! Let me check.",
    tool_use("get_weather", {"city": "Paris", "days": 3}, id="call-7"),
    tool_use("get_time", {"zone": "CET"}),
    delta_chars=5,
)
NO_AFC = types.GenerateContentConfig(automatic_continuation=False)


def client_for(fake: FakeGemini, **options: Any) -> genai.Client:
    # On httpx2, as the adapter runs it: with aiohttp installed (the twilio SDK
    # brings it) the SDK would take that instead.
    options.setdefault("async_client_args", {"transport": httpx2.AsyncHTTPTransport()})
    return genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url=fake.base_url, **options)
    )


@pytest.fixture
async def sdk(fake: FakeGemini) -> AsyncIterator[genai.Client]:
    client = client_for(fake)
    yield client
    await client.aio.aclose()


async def chunks_of(sdk: genai.Client, **config: Any) -> list[types.GenerateContentResponse]:
    stream = await sdk.aio.models.generate_content_stream(
        model="gemini-test", contents="Hi", config=NO_AFC.model_copy(update=config)
    )
    return [chunk async for chunk in stream]


def parts_of(chunks: list[types.GenerateContentResponse]) -> list[types.Part]:
    out: list[types.Part] = []
    for chunk in chunks:
        assert chunk.candidates and chunk.candidates[0].content
        assert chunk.candidates[0].content.role == "model"
        out += chunk.candidates[0].content.parts or []
    return out


async def test_sdk_reads_the_stream_as_scripted(fake: FakeGemini, sdk: genai.Client) -> None:
    fake.add(REPLY)
    chunks = await chunks_of(sdk)
    parts = parts_of(chunks)
    assert len(parts) == len(chunks)  # one part per event
    thoughts = [p.text for p in parts if p.thought]
    texts = [p.text for p in parts if p.text is not None and not p.thought]
    calls = [p.function_call for p in parts if p.function_call is not None]
    assert thoughts == ["The u", "ser g", "reets", "."]
    assert "".join(t or "" for t in texts) == "Hello! Let me check."
    assert [(c.name, c.args, c.id) for c in calls] == [
        ("get_weather", {"city": "Paris", "days": 3}, "call-7"),
        ("get_time", {"zone": "CET"}, None),  # the Developer API often sends no id
    ]
    # The thinking signature rides on the first part after the thoughts.
    signed = [p for p in parts if p.thought_signature]
    assert [(p.text, p.thought_signature) for p in signed] == [("Hello", b"sig-1")]
    finals = [c.candidates[0].finish_reason for c in chunks if c.candidates]
    assert finals[:-1] == [None] * (len(finals) - 1)
    assert finals[-1] == types.FinishReason.STOP  # STOP after function calls too
    usage = chunks[-1].usage_metadata
    assert usage is not None
    assert (usage.prompt_token_count, usage.thoughts_token_count) == (12, 4)
    assert usage.candidates_token_count == 4 + 2  # text pieces and calls
    assert usage.total_token_count == 12 + 4 + 6


async def test_signature_on_the_last_thought_when_nothing_follows(
    fake: FakeGemini, sdk: genai.Client
) -> None:
    fake.add(ScriptedReply.of(thinking("Just thinking.", signature="s2"), delta_chars=4))
    parts = parts_of(await chunks_of(sdk))
    assert all(p.thought for p in parts)
    assert [p.thought_signature for p in parts] == [None, None, None, b"s2"]


async def test_wire_framing_is_crlf_sse(fake: FakeGemini) -> None:
    fake.add(ScriptedReply.of("Hi there", delta_chars=4, stop_reason="max_tokens"))
    async with httpx2.AsyncClient(base_url=fake.base_url) as http:
        response = await http.post(
            "/v1beta/models/gemini-test:streamGenerateContent?alt=sse",
            json={"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]},
            headers={"x-goog-api-key": "k"},
        )
    assert response.headers["content-type"].startswith("text/event-stream")
    events = response.text.split("\r\n\r\n")
    assert events[-1] == "" and len(events) == 3
    assert all(event.startswith("data: {") for event in events[:2])
    assert '"finishReason":"MAX_TOKENS"' in events[1]
    assert fake.requests[0].path == "/v1beta/models/gemini-test:streamGenerateContent"
    assert fake.requests[0].query == {"alt": "sse"}


async def test_whole_response(fake: FakeGemini, sdk: genai.Client) -> None:
    fake.add(REPLY)
    response = await sdk.aio.models.generate_content(
        model="gemini-test", contents="Hi", config=NO_AFC
    )
    assert response.candidates and response.candidates[0].content
    parts = response.candidates[0].content.parts or []
    assert [(p.text, p.thought) for p in parts[:2]] == [
        ("The user greets.", True),
        ("Hello! Let me check.", None),
    ]
    assert parts[1].thought_signature == b"sig-1"
    names = [p.function_call.name for p in parts[2:] if p.function_call]
    assert names == ["get_weather", "get_time"]
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert fake.requests[0].path == "/v1/models/gemini-test:generateContent"


async def test_http_error_is_googles_json_with_retry_after(
    fake: FakeGemini, sdk: genai.Client
) -> None:
    fake.add(ScriptedReply.http_error(429, retry_after=0.5, message="quota"))
    with pytest.raises(errors.ClientError) as caught:
        await chunks_of(sdk)
    error = caught.value
    assert (error.code, error.status, error.message) == (429, "RESOURCE_EXHAUSTED", "quota")
    assert error.response.headers["retry-after"] == "0.5"
    detail = error.details["error"]["details"][0]
    assert detail["retryDelay"] == "0.5s" and detail["@type"].endswith("RetryInfo")
    assert len(fake.requests) == 1  # the SDK's retries are off by default


@pytest.mark.parametrize(("code", "status"), [(503, "UNAVAILABLE"), (500, "INTERNAL")])
async def test_server_errors(fake: FakeGemini, sdk: genai.Client, code: int, status: str) -> None:
    fake.add(ScriptedReply.http_error(code))
    with pytest.raises(errors.ServerError) as caught:
        await sdk.aio.models.generate_content(model="gemini-test", contents="Hi", config=NO_AFC)
    assert (caught.value.code, caught.value.status) == (code, status)


async def test_error_event_after_three_deltas(fake: FakeGemini, sdk: genai.Client) -> None:
    fake.add(ScriptedReply.of("abcdefghij", delta_chars=2, fault=Fault("error_event", 3, 503)))
    stream = await sdk.aio.models.generate_content_stream(
        model="gemini-test", contents="Hi", config=NO_AFC
    )
    texts: list[str] = []
    with pytest.raises(errors.ServerError) as caught:
        async for chunk in stream:
            texts.append(chunk.text or "")
    assert texts == ["ab", "cd", "ef"]
    assert (caught.value.code, caught.value.status) == (503, "UNAVAILABLE")


async def test_malformed_line(fake: FakeGemini, sdk: genai.Client) -> None:
    fake.add(ScriptedReply.of("abcdef", delta_chars=2, fault=Fault("malformed", 1)))
    with pytest.raises(errors.UnknownApiResponseError, match="not json"):
        await chunks_of(sdk)


async def test_dropped_connection(fake: FakeGemini, sdk: genai.Client) -> None:
    fake.add(ScriptedReply.of("abcdef", delta_chars=2, fault=Fault("drop", 2)))
    with pytest.raises(httpx2.RemoteProtocolError):
        await chunks_of(sdk)


async def test_no_reply_left_is_500(fake: FakeGemini, sdk: genai.Client) -> None:
    with pytest.raises(errors.ServerError):
        await chunks_of(sdk)


async def test_requests_the_real_api_rejects(fake: FakeGemini) -> None:
    url = "/v1/models/gemini-test:generateContent"
    hi = [{"role": "user", "parts": [{"text": "Hi"}]}]
    async with httpx2.AsyncClient(base_url=fake.base_url) as http:
        no_key = await http.post(url, json={"contents": hi})
        no_contents = await http.post(url, json={}, headers={"x-goog-api-key": "k"})
        too_many = await http.post(  # snake_case keys are read too
            url,
            json={"contents": hi, "generation_config": {"stop_sequences": list("abcdef")}},
            headers={"x-goog-api-key": "k"},
        )
    assert no_key.status_code == 403 and no_key.json()["error"]["status"] == "PERMISSION_DENIED"
    assert no_contents.status_code == 400
    assert too_many.status_code == 400 and "stop_sequences" in too_many.json()["error"]["message"]
    assert fake.pending == 0 and len(fake.requests) == 3


async def test_env_points_the_sdk_at_the_fake(
    fake: FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    fake.add(ScriptedReply.of("From env."))
    client = genai.Client()
    response = await client.aio.models.generate_content(model="gemini-test", contents="Hi")
    await client.aio.aclose()
    assert response.text == "From env."
    assert fake.requests[0].headers["x-goog-api-key"] == "fake-key"


async def test_closed_stream_is_counted(fake: FakeGemini) -> None:
    fake.add(ScriptedReply.of("x" * 100, delta_chars=1, delta_delay_s=0.02))
    body = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
    url = "/v1/models/gemini-test:streamGenerateContent?alt=sse"
    async with (
        httpx2.AsyncClient(base_url=fake.base_url) as http,
        http.stream("POST", url, json=body, headers={"x-goog-api-key": "k"}) as response,
    ):
        async for _ in response.aiter_bytes():
            break
    deadline = time.monotonic() + 3
    while fake.cancelled_streams == 0 and time.monotonic() < deadline:
        await anyio.sleep(0.01)
    assert fake.cancelled_streams == 1


def test_signature_is_base64_on_the_wire() -> None:
    from voice_membrane.testing.fake_gemini import Events

    parts = Events(ScriptedReply.of(thinking("t", signature="sig"), "x"), "m", "r").parts(True)
    assert parts[1]["thoughtSignature"] == base64.b64encode(b"sig").decode()

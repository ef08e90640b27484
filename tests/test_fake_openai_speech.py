"""FakeOpenAISpeech speaks the real /v1/audio/speech protocol: the ``openai``
SDK's streaming response reads speech in the requested format, its errors as
the SDK's own exceptions."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import openai
import pytest
import soundfile
from openai import AsyncOpenAI

from voice_membrane.testing.fake_openai_speech import FakeOpenAISpeech
from voice_membrane.testing.fake_speech import SpeechScript
from voice_membrane.testing.speech_check import analyze_speech, speech_problems
from voice_membrane.vocab.audio import pcm16_from_bytes

pytestmark = pytest.mark.anyio
TEXT = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAISpeech]:
    with FakeOpenAISpeech() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _clean(server: FakeOpenAISpeech) -> None:
    server.reset()


def client(server: FakeOpenAISpeech, key: str = "test-key", **kw: Any) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=server.base_url, api_key=key, max_retries=0, **kw)


async def speech(
    server: FakeOpenAISpeech, key: str = "test-key", timeout: float = 10, **kw: Any
) -> list[bytes]:
    params: dict[str, Any] = {"model": "gpt-4o-mini-tts", "voice": "alloy", "input": TEXT}
    params.update(kw)
    with anyio.fail_after(10):
        async with client(server, key, timeout=timeout) as sdk:
            create = sdk.audio.speech.with_streaming_response.create
            async with create(**params) as response:
                return [chunk async for chunk in response.iter_bytes()]


async def test_pcm_streams_speech_in_chunks_of_odd_sizes(server: FakeOpenAISpeech) -> None:
    server.add(SpeechScript(char_s=0.004, frame_ms=50))  # paced: chunks arrive one by one
    chunks = await speech(server, response_format="pcm", instructions="Calm.")
    audio = b"".join(chunks)
    assert len(audio) % 2 == 0
    assert any(len(chunk) % 2 for chunk in chunks)  # a client must carry the odd byte
    report = analyze_speech(pcm16_from_bytes(audio), 24000)
    assert speech_problems(report, TEXT) == []
    request = server.requests[0]
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.body["instructions"] == "Calm."
    assert server.text_received() == TEXT


async def test_wav_has_a_true_header(server: FakeOpenAISpeech) -> None:
    audio = b"".join(await speech(server, response_format="wav", model="tts-1"))
    samples, rate = soundfile.read(io.BytesIO(audio), dtype="int16")
    assert rate == 24000
    assert speech_problems(analyze_speech(samples, rate), TEXT) == []


async def test_sse_events_carry_the_audio_and_usage(server: FakeOpenAISpeech) -> None:
    body = b"".join(await speech(server, response_format="pcm", stream_format="sse"))
    events = [json.loads(line[6:]) for line in body.decode().splitlines() if line]
    assert {e["type"] for e in events[:-1]} == {"speech.audio.delta"}
    assert events[-1]["type"] == "speech.audio.done"
    assert events[-1]["usage"]["output_tokens"] == len(events) - 1
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert speech_problems(analyze_speech(pcm16_from_bytes(audio), 24000), TEXT) == []


@pytest.mark.parametrize(
    ("params", "error", "param"),
    [
        ({"voice": "nobody"}, openai.BadRequestError, "voice"),
        ({"input": "word " * 1000}, openai.BadRequestError, None),
        ({"model": "tts-9"}, openai.NotFoundError, None),
        ({"speed": 9.0}, openai.BadRequestError, "speed"),
        ({"response_format": "mp3"}, openai.BadRequestError, "response_format"),
        ({"model": "tts-1", "stream_format": "sse"}, openai.BadRequestError, "stream_format"),
    ],
)
async def test_invalid_requests_get_openai_errors(
    server: FakeOpenAISpeech, params: dict[str, Any], error: type[Exception], param: str | None
) -> None:
    with pytest.raises(error) as raised:
        await speech(server, **{"response_format": "pcm", **params})
    body = raised.value.body  # type: ignore[attr-defined]
    assert body["param"] == param
    assert body["type"] == "invalid_request_error"


async def test_wrong_key_and_scripted_rate_limit(server: FakeOpenAISpeech) -> None:
    with pytest.raises(openai.AuthenticationError) as refused:
        await speech(server, key="wrong-key", response_format="pcm")
    assert "wrong-key" not in str(refused.value)
    server.add(SpeechScript.http_error(429, retry_after=0.5))
    with pytest.raises(openai.RateLimitError) as limited:
        await speech(server, response_format="pcm")
    assert limited.value.response.headers["retry-after"] == "0.5"
    assert server.pending == 0


async def test_drop_cuts_the_body(server: FakeOpenAISpeech) -> None:
    server.add(SpeechScript.drop(after_frames=2))
    with pytest.raises((httpx2.HTTPError, openai.APIError)):
        await speech(server, response_format="pcm")


async def test_stall_until_the_client_gives_up(server: FakeOpenAISpeech) -> None:
    server.add(SpeechScript.stall(after_frames=1))
    with pytest.raises((httpx2.ReadTimeout, openai.APITimeoutError)):
        await speech(server, timeout=0.3, response_format="pcm")
    with anyio.fail_after(5):
        while server.early_closes == 0:
            await anyio.sleep(0.01)
    assert server.early_closes == 1


async def test_malformed_sse_line(server: FakeOpenAISpeech) -> None:
    server.add(SpeechScript.malformed(after_frames=1))
    body = b"".join(await speech(server, response_format="pcm", stream_format="sse"))
    lines = [line for line in body.decode().splitlines() if line]
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[1][6:])
    assert json.loads(lines[-1][6:])["type"] == "speech.audio.done"

"""FakeElevenLabs speaks ElevenLabs' real protocols: a raw ``websockets`` client
drives the stream-input sockets, the ``elevenlabs`` SDK the HTTP stream and the
voice lookup. The audio is speech in the requested format, the alignment covers
the text sent, and the buffering, faults and errors are those documented."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
import websockets
from elevenlabs.client import AsyncElevenLabs
from elevenlabs.core.api_error import ApiError
from elevenlabs.errors import UnprocessableEntityError

from voice_membrane.testing.fake_elevenlabs import FakeElevenLabs
from voice_membrane.testing.fake_speech import SpeechScript
from voice_membrane.testing.speech_check import analyze_speech, speech_problems
from voice_membrane.vocab.audio import pcm16_from_bytes, pcm16_from_ulaw

pytestmark = pytest.mark.anyio
KEY = {"xi-api-key": "test-key"}
SENTENCE = "The quick brown fox jumps over the lazy dog. "


@pytest.fixture(scope="module")
def server() -> Iterator[FakeElevenLabs]:
    with FakeElevenLabs() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _clean(server: FakeElevenLabs) -> None:
    server.reset()


def url(server: FakeElevenLabs, query: str = "output_format=pcm_16000", *, multi: bool = False,
        voice: str = "fake-voice") -> str:  # fmt: skip
    path = "multi-stream-input" if multi else "stream-input"
    return f"{server.ws_url}/v1/text-to-speech/{voice}/{path}?{query}"


async def converse(
    address: str, messages: list[dict[str, Any]], headers: dict[str, str] | None = None
) -> tuple[list[Any], int | None, str]:
    """Send ``messages``, read to the close: (replies, close code, close reason)."""
    replies: list[Any] = []
    with anyio.fail_after(10):
        async with websockets.connect(
            address, additional_headers=KEY if headers is None else headers
        ) as ws:
            try:
                for message in messages:
                    await ws.send(json.dumps(message))
            except websockets.ConnectionClosed:
                pass  # the fake closed first (an error): read what it sent
            try:
                async for raw in ws:
                    try:
                        replies.append(json.loads(raw))
                    except json.JSONDecodeError:
                        replies.append(raw)
            except websockets.ConnectionClosed:
                pass
            return replies, ws.close_code, ws.close_reason or ""


def audio_of(replies: list[Any]) -> bytes:
    return b"".join(base64.b64decode(r["audio"]) for r in replies if r.get("audio"))


def check_alignment(replies: list[Any], text: str, rate: int, width: int) -> None:
    """Chars joined equal ``text``; times (relative to each message's audio)
    become monotonic absolute times within the whole audio."""
    chars: list[str] = []
    absolute: list[float] = []
    offset_ms = 0.0
    for reply in (r for r in replies if r.get("audio")):
        chunk_ms = len(base64.b64decode(reply["audio"])) / width * 1000 / rate
        alignment = reply["normalizedAlignment"]
        assert alignment == reply["alignment"]
        if alignment is not None:
            assert len(alignment["chars"]) == len(alignment["charStartTimesMs"])
            assert len(alignment["chars"]) == len(alignment["charDurationsMs"])
            assert all(0 <= s <= chunk_ms + 1 for s in alignment["charStartTimesMs"])
            chars += alignment["chars"]
            absolute += [offset_ms + s for s in alignment["charStartTimesMs"]]
        offset_ms += chunk_ms
    assert "".join(chars) == text
    assert absolute == sorted(absolute)
    assert absolute[-1] < offset_ms


@pytest.mark.parametrize(
    ("output_format", "rate", "width"),
    [("pcm_16000", 16000, 2), ("pcm_44100", 44100, 2), ("ulaw_8000", 8000, 1)],
)
async def test_stream_input_speaks_the_text_in_the_requested_format(
    server: FakeElevenLabs, output_format: str, rate: int, width: int
) -> None:
    messages = [
        {"text": " ", "voice_settings": {"stability": 0.5, "similarity_boost": 0.8}},
        {"text": "Hello there, ", "try_trigger_generation": False},
        {"text": SENTENCE},
        {"text": ""},
    ]
    replies, code, _ = await converse(url(server, f"output_format={output_format}"), messages)
    audio = audio_of(replies)
    samples = pcm16_from_ulaw(audio) if width == 1 else pcm16_from_bytes(audio)
    spoken = "Hello there, " + SENTENCE
    assert speech_problems(analyze_speech(samples, rate), spoken) == []
    check_alignment(replies, " " + spoken, rate, width)
    assert replies[-1] == {"isFinal": True}
    assert all(r["isFinal"] is None for r in replies[:-1])
    assert code == 1000
    assert server.connections[0].text == " " + spoken
    assert server.text_received() == " " + spoken


async def test_text_waits_for_the_chunk_length_schedule_or_a_flush(server: FakeElevenLabs) -> None:
    words = "one two three four five six seven eight nine ten "  # 50 characters
    first = {"text": " ", "generation_config": {"chunk_length_schedule": [60, 90]}}
    messages = [first, {"text": words}, {"text": "eleven "}, {"text": words}]
    messages += [{"text": words}, {"text": words}, {"text": "last words "}]
    messages += [{"text": " ", "flush": True}, {"text": "tail "}, {"text": ""}]
    replies, code, _ = await converse(url(server), messages)
    generations = [text for _, text in server.connections[0].generations]
    assert generations == [
        " " + words + "eleven " + words,  # 58 characters wait; 108 pass the first step, 60
        words + words,  # 100 pass the second, 90 (the last step repeats)
        "last words  ",  # 12: flushed
        "tail ",  # the end of input
    ]
    check_alignment(replies, "".join(generations), 16000, 2)
    assert code == 1000


async def test_auto_mode_and_try_trigger_generate_without_the_schedule(
    server: FakeElevenLabs,
) -> None:
    await converse(
        url(server, "output_format=pcm_16000&auto_mode=true"),
        [{"text": " "}, {"text": "Hi. "}, {"text": "How are you? "}, {"text": ""}],
    )
    auto = [text for _, text in server.connections[0].generations]
    assert auto == [" Hi. ", "How are you? "]
    long = "This sentence has well over fifty characters in it, surely. "
    trigger = {"try_trigger_generation": True}
    messages = [{"text": " "}, {"text": "Short. ", **trigger}, {"text": long, **trigger}]
    await converse(url(server), [*messages, {"text": "End. "}, {"text": ""}])
    triggered = [text for _, text in server.connections[1].generations]
    assert triggered == [" Short. " + long, "End. "]


async def test_inactivity_timeout_sends_the_error_then_closes_1008(server: FakeElevenLabs) -> None:
    replies, code, reason = await converse(
        url(server, "output_format=pcm_16000&inactivity_timeout=0.2"), [{"text": " "}]
    )
    assert replies == [
        {
            "message": (
                "Have not received a new text input within the timeout of 0.2 seconds. Streaming "
                "input terminated. Please make sure to either feed the input in the timely "
                'manner, or to send the end of input text (empty string "") when done.'
            ),
            "error": "input_timeout_exceeded",
            "code": 1008,
        }
    ]
    assert code == 1008
    assert reason.startswith("Have not received a new text input")


@pytest.mark.parametrize(
    ("address", "headers", "first", "error"),
    [
        ("pcm_16000", {"xi-api-key": "wrong"}, {"text": " "}, "invalid_api_key"),
        ("pcm_16000", {}, {"text": " "}, "invalid_api_key"),
        ("pcm_16000", {}, {"text": " ", "xi_api_key": "wrong"}, "invalid_api_key"),
        ("pcm_16000&voice=nobody", KEY, {"text": " "}, "voice_not_found"),
        ("mp3_44100_128", KEY, {"text": " "}, "invalid_output_format"),
    ],
)
async def test_auth_voice_and_format_errors_close_1008(
    server: FakeElevenLabs, address: str, headers: dict[str, str], first: dict[str, Any], error: str
) -> None:
    output_format, _, voice = address.partition("&voice=")
    target = url(server, f"output_format={output_format}", voice=voice or "fake-voice")
    replies, code, _ = await converse(target, [first, {"text": "Hi. "}], headers={**headers})
    assert [r["error"] for r in replies] == [error]
    assert code == 1008
    assert "wrong" not in json.dumps(replies)


async def test_key_in_the_first_message_is_accepted(server: FakeElevenLabs) -> None:
    first = {"text": " ", "xi_api_key": "test-key"}
    replies, code, _ = await converse(url(server), [first, {"text": "Hi. "}, {"text": ""}], {})
    assert code == 1000
    assert replies[-1] == {"isFinal": True}


async def test_changed_voice_settings_close_1008(server: FakeElevenLabs) -> None:
    first = {"text": " ", "voice_settings": {"stability": 0.5}}
    changed = {"text": "Hi. ", "voice_settings": {"stability": 0.9}}
    replies, code, _ = await converse(url(server), [first, changed])
    assert replies[0]["error"] == "invalid_request"
    assert code == 1008


async def test_scripted_http_error_refuses_the_handshake(server: FakeElevenLabs) -> None:
    server.add(SpeechScript.http_error(429, retry_after=1.5))
    with pytest.raises(websockets.InvalidStatus) as refused:
        await converse(url(server), [{"text": " "}])
    response = refused.value.response
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1.5"
    assert json.loads(response.body)["detail"]["status"] == "too_many_concurrent_requests"


async def test_drop_cuts_the_connection_without_a_close_frame(server: FakeElevenLabs) -> None:
    server.add(SpeechScript.drop(after_frames=2))
    replies: list[Any] = []
    with anyio.fail_after(10):
        async with websockets.connect(url(server), additional_headers=KEY) as ws:
            for message in [{"text": " "}, {"text": SENTENCE, "flush": True}]:
                await ws.send(json.dumps(message))
            with pytest.raises(websockets.ConnectionClosedError) as closed:
                async for raw in ws:
                    replies.append(json.loads(raw))
    assert closed.value.rcvd is None  # no close frame: the TCP connection was cut
    assert len(replies) == 2
    assert all(r["audio"] for r in replies)
    assert server.connections[0].dropped


async def test_stall_keeps_the_connection_open_and_silent(server: FakeElevenLabs) -> None:
    server.add(SpeechScript.stall(after_frames=1))
    with anyio.fail_after(10):
        async with websockets.connect(url(server), additional_headers=KEY) as ws:
            for message in [{"text": " "}, {"text": SENTENCE}, {"text": ""}]:
                await ws.send(json.dumps(message))
            assert json.loads(await ws.recv())["audio"]
            with anyio.move_on_after(0.3) as waited:
                await ws.recv()
            assert waited.cancelled_caught  # nothing more came
            assert server.open_connections == 1
    with anyio.fail_after(5):
        while server.open_connections:
            await anyio.sleep(0.01)
    assert server.client_closed_early == 1
    assert server.connections[0].frames_sent == 1


@pytest.mark.parametrize("breaks", ["json", "base64"])
async def test_malformed_frame(server: FakeElevenLabs, breaks: Any) -> None:
    server.add(SpeechScript.malformed(after_frames=1, breaks=breaks))
    replies, code, _ = await converse(url(server), [{"text": " "}, {"text": "Hi. "}, {"text": ""}])
    broken = replies[1]
    if breaks == "json":
        assert isinstance(broken, str)
    else:
        with pytest.raises(ValueError):
            base64.b64decode(broken["audio"], validate=True)
    assert replies[-1] == {"isFinal": True}
    assert code == 1000


async def test_client_closing_mid_speech_is_counted(server: FakeElevenLabs) -> None:
    server.add(SpeechScript(char_s=0.05))
    with anyio.fail_after(10):
        async with websockets.connect(url(server), additional_headers=KEY) as ws:
            await ws.send(json.dumps({"text": " "}))
            await ws.send(json.dumps({"text": SENTENCE, "flush": True}))
            assert json.loads(await ws.recv())["audio"]
        while server.open_connections:
            await anyio.sleep(0.01)
    assert server.client_closed_early == 1
    assert server.early_closes == 1
    assert server.connections[0].close_code is None


async def test_multi_context_streams_are_independent(server: FakeElevenLabs) -> None:
    first, second = "Good morning. ", "Bad weather today. "
    messages = [
        {"text": " ", "context_id": "a", "voice_settings": {"stability": 0.4}},
        {"text": " ", "context_id": "b"},
        {"text": first, "context_id": "a"},
        {"text": second, "context_id": "b"},
        {"text": "", "context_id": "b"},  # keeps b alive; does not end it
        {"context_id": "a", "flush": True},
        {"context_id": "b", "flush": True},
        {"text": "Never said. ", "context_id": "b"},
        {"context_id": "b", "close_context": True},
        {"close_socket": True},
    ]
    replies, code, _ = await converse(url(server, multi=True), messages)
    by_context: dict[str, list[Any]] = {"a": [], "b": []}
    for reply in replies:
        by_context[reply["contextId"]].append(reply)
    check_alignment(by_context["a"], " " + first, 16000, 2)
    check_alignment(by_context["b"], " " + second, 16000, 2)
    for context in ("a", "b"):
        finals = [r for r in by_context[context] if r.get("isFinal")]
        assert finals == [{"isFinal": True, "contextId": context}]
        assert by_context[context][-1] == finals[0]
    assert code == 1000
    conn = server.connections[0]
    assert conn.texts == {"a": " " + first, "b": " " + second + "Never said. "}
    assert sorted(conn.generations) == [("a", " " + first), ("b", " " + second)]


async def test_http_stream_and_voice_lookup_through_the_sdk(server: FakeElevenLabs) -> None:
    client = AsyncElevenLabs(base_url=server.base_url, api_key="test-key")
    voice = await client.voices.get("fake-voice")
    assert (voice.voice_id, voice.name) == ("fake-voice", "Fake Voice")
    chunks = [
        chunk
        async for chunk in client.text_to_speech.stream(
            "fake-voice",
            text=SENTENCE,
            model_id="eleven_flash_v2_5",
            output_format="pcm_22050",
            optimize_streaming_latency=2,
            previous_text="Before.",
        )
    ]
    audio = b"".join(chunks)
    assert len(chunks) > 1
    assert speech_problems(analyze_speech(pcm16_from_bytes(audio), 22050), SENTENCE) == []
    request = server.requests[-1]
    assert request.query["output_format"] == "pcm_22050"
    assert request.query["optimize_streaming_latency"] == "2"
    assert request.body["previous_text"] == "Before."
    assert request.headers["xi-api-key"] == "test-key"
    assert server.text_received() == SENTENCE


async def collect(client: AsyncElevenLabs, voice: str = "fake-voice", **kw: Any) -> bytes:
    chunks = client.text_to_speech.stream(voice, text="Hello. ", **kw)
    return b"".join([chunk async for chunk in chunks])


async def test_http_errors_reach_the_sdk(server: FakeElevenLabs) -> None:
    good = AsyncElevenLabs(base_url=server.base_url, api_key="test-key")
    bad = AsyncElevenLabs(base_url=server.base_url, api_key="wrong-key")
    with pytest.raises(ApiError) as unauthorised:
        await collect(bad, output_format="pcm_16000")
    assert unauthorised.value.status_code == 401
    assert unauthorised.value.body["detail"]["status"] == "invalid_api_key"
    assert "wrong-key" not in str(unauthorised.value.body)
    with pytest.raises(ApiError) as missing:
        await good.voices.get("nobody")
    assert missing.value.status_code == 404
    assert missing.value.body["detail"]["status"] == "voice_not_found"
    with pytest.raises(UnprocessableEntityError):
        await collect(good)  # mp3, the default: not encodable here
    server.add(SpeechScript.http_error(503, retry_after=2))
    with pytest.raises(ApiError) as unavailable:
        await collect(good, output_format="pcm_16000")
    assert unavailable.value.status_code == 503
    assert (unavailable.value.headers or {})["retry-after"] == "2"


async def test_http_drop_and_early_close(server: FakeElevenLabs) -> None:
    client = AsyncElevenLabs(base_url=server.base_url, api_key="test-key")
    server.add(SpeechScript.drop(after_frames=1))
    received: list[bytes] = []
    with pytest.raises(Exception):  # noqa: B017 - the transport's own error
        async for chunk in client.text_to_speech.stream(
            "fake-voice", text=SENTENCE, output_format="pcm_16000"
        ):
            received.append(chunk)
    assert 0 < len(b"".join(received)) <= 3200  # one 100 ms frame of the sentence
    server.add(SpeechScript(char_s=0.05))
    stream = client.text_to_speech.stream("fake-voice", text=SENTENCE, output_format="pcm_16000")
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    with anyio.fail_after(5):
        while server.early_closes == 0:
            await anyio.sleep(0.01)
    assert server.early_closes == 1

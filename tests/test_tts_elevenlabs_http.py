"""The ElevenLabs HTTP engine against FakeElevenLabs: speech per piece in text
order with ``previous_text``, retries, read timeout, cancellation, errors; the
shared format, URL and decoding rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import numpy as np
import pytest
from tts_helpers import PIECES, run_stream, samples_of, task_count, tasks_settle

from voice_membrane.infra.redact import redact
from voice_membrane.testing.fake_elevenlabs import FakeElevenLabs
from voice_membrane.testing.fake_speech import SpeechScript
from voice_membrane.testing.speech_check import analyze_speech, speech_problems
from voice_membrane.tts.base import TtsError
from voice_membrane.tts.elevenlabs_common import (
    AudioDecoder,
    ElevenLabsConfig,
    format_for_sink,
)
from voice_membrane.tts.elevenlabs_http import ElevenLabsHttpEngine
from voice_membrane.tts.elevenlabs_ws import ElevenLabsSocketEngine
from voice_membrane.tts.options import TtsOptions
from voice_membrane.tts.registry import create_engine
from voice_membrane.vocab.audio import pcm16_from_bytes

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server() -> Iterator[FakeElevenLabs]:
    with FakeElevenLabs() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _env(server: FakeElevenLabs, monkeypatch: pytest.MonkeyPatch) -> None:
    server.reset()
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)


def engine(**options: Any) -> ElevenLabsHttpEngine:
    options.setdefault("read_timeout_s", 3.0)
    settings = TtsOptions(spec="elevenlabs-http:fake-voice", **options)
    return ElevenLabsHttpEngine("fake-voice", settings, 16000)


def posts(server: FakeElevenLabs) -> list[Any]:
    return [r for r in server.requests if r.method == "POST"]


@pytest.mark.parametrize(
    ("fmt", "rate"), [(None, 16000), ("pcm_22050", 22050), ("ulaw_8000", 8000)]
)
async def test_speaks_each_piece_in_text_order(
    server: FakeElevenLabs, fmt: str | None, rate: int
) -> None:
    tts = engine(output_format=fmt, max_in_flight=3)
    await tts.start()
    voiced = await run_stream(tts, PIECES)
    await tts.aclose()
    assert tts.sample_rate == rate and all(v.audio.sample_rate == rate for v in voiced)
    assert [v.piece for v in voiced] == sorted(v.piece for v in voiced)
    text = " ".join(PIECES)
    assert speech_problems(analyze_speech(samples_of(voiced), rate), text) == []
    for i, piece in enumerate(PIECES):  # each piece's audio is that piece alone
        alone = samples_of([v for v in voiced if v.piece == i])
        assert speech_problems(analyze_speech(alone, rate), piece) == []
    bodies = sorted((r.body for r in posts(server)), key=lambda b: PIECES.index(b["text"]))
    assert [b["text"] for b in bodies] == PIECES  # each piece once
    assert "previous_text" not in bodies[0]
    assert bodies[2]["previous_text"] == PIECES[0] + PIECES[1]  # prosody across pieces
    assert bodies[0]["model_id"] == "eleven_flash_v2_5"
    assert {r.query["output_format"] for r in posts(server)} == {fmt or "pcm_16000"}


async def test_options_reach_the_request(server: FakeElevenLabs) -> None:
    tts = engine(
        model="eleven_turbo_v2_5",
        optimize_streaming_latency=3,
        voice_settings={"stability": 0.4, "speed": 1.1},
    )
    await run_stream(tts, PIECES[:1])
    await tts.aclose()
    (request,) = posts(server)
    assert request.query["optimize_streaming_latency"] == "3"
    assert request.body["model_id"] == "eleven_turbo_v2_5"
    assert request.body["voice_settings"]["stability"] == 0.4
    assert request.body["voice_settings"]["speed"] == 1.1
    assert request.headers["xi-api-key"] == "test-key"


async def test_429_then_ok_is_retried_before_the_first_audio(server: FakeElevenLabs) -> None:
    server.add(SpeechScript.http_error(429, retry_after=0.01))
    tts = engine(max_in_flight=1)
    voiced = await run_stream(tts, PIECES[:2])
    await tts.aclose()
    assert [r.body["text"] for r in posts(server)] == [PIECES[0], PIECES[0], PIECES[1]]
    assert {v.piece for v in voiced} == {0, 1}


async def test_a_5xx_after_the_retries_is_one_clear_error(server: FakeElevenLabs) -> None:
    server.add(*[SpeechScript.http_error(503) for _ in range(3)])
    tts = engine(max_retries=1, max_in_flight=1)
    with pytest.raises(TtsError, match="HTTP 503"):
        await run_stream(tts, PIECES[:1])
    await tts.aclose()
    assert len(posts(server)) == 2


async def test_a_stall_is_a_read_timeout(server: FakeElevenLabs) -> None:
    server.add(SpeechScript.stall(after_frames=1))
    tts = engine(read_timeout_s=0.3, max_retries=0)
    with pytest.raises(TtsError, match="read_timeout_s"):
        await run_stream(tts, PIECES[:1], limit_s=10)
    await tts.aclose()


async def test_interruption_closes_the_response_and_leaves_no_task(
    server: FakeElevenLabs,
) -> None:
    server.add(SpeechScript(char_s=0.05), SpeechScript(char_s=0.05))
    tts = engine()
    before = task_count()
    with anyio.fail_after(10):
        async with tts.open_stream() as stream:
            for piece in PIECES[:2]:
                await stream.push(piece)
            async for _ in stream:
                break
    assert stream.stats.cancelled_requests >= 1
    with anyio.fail_after(5):
        while server.early_closes < 1:
            await anyio.sleep(0.01)
    await tts.aclose()
    assert await tasks_settle(before)


async def test_a_bad_key_names_the_variable(
    server: FakeElevenLabs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ELEVENLABS_API_KEY", "wrong-key-123456")
    tts = engine()
    with pytest.raises(TtsError, match="set ELEVENLABS_API_KEY") as caught:
        await tts.start()
    assert "wrong-key" not in str(caught.value)
    with pytest.raises(TtsError, match="set ELEVENLABS_API_KEY"):
        await run_stream(tts, PIECES[:1])
    await tts.aclose()


async def test_a_key_from_another_variable_is_named_in_the_error(
    server: FakeElevenLabs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_VOICE_KEY", "another-wrong-key-1234")
    tts = engine(api_key_env="MY_VOICE_KEY")
    with pytest.raises(TtsError, match="set MY_VOICE_KEY") as caught:
        await tts.start()
    assert "another-wrong" not in redact(repr(tts)) + str(caught.value)


async def test_an_unknown_voice_is_named(server: FakeElevenLabs) -> None:
    tts = ElevenLabsHttpEngine("nobody", TtsOptions(spec="elevenlabs-http:nobody"))
    with pytest.raises(TtsError, match="'nobody'"):
        await tts.start()
    await tts.aclose()


async def test_an_unreachable_service_is_retryable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELEVENLABS_BASE_URL", "http://127.0.0.1:9")  # discard port: refused
    tts = engine(max_retries=0)
    with pytest.raises(TtsError, match="cannot reach") as caught:
        await tts.start()
    assert caught.value.retryable
    await tts.aclose()


# ---------------------------------------------------------------- shared rules


def test_an_odd_byte_is_carried_to_the_next_chunk() -> None:
    pcm = np.arange(-500, 500, 7, dtype=np.int16).astype("<i2").tobytes()
    decoder = AudioDecoder("pcm_16000")
    parts = [pcm[:3], pcm[3:4], pcm[4:101], pcm[101:]]
    out = np.concatenate([decoder.feed(p) for p in parts])
    assert np.array_equal(out, pcm16_from_bytes(pcm))


def test_the_format_follows_the_sink() -> None:
    assert format_for_sink(16000) == "pcm_16000"
    assert format_for_sink(44100) == "pcm_44100"
    assert format_for_sink(48000) == "pcm_24000"
    assert format_for_sink(8000) == "ulaw_8000"  # a phone call: μ-law end to end
    assert format_for_sink(11025) == "pcm_22050"
    assert format_for_sink(None) == "pcm_24000"


def test_the_socket_url_is_derived_from_the_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELEVENLABS_API_KEY", "k" * 20)
    monkeypatch.delenv("ELEVENLABS_BASE_URL", raising=False)
    options = TtsOptions(spec="elevenlabs:v1", auto_mode=True, output_format="ulaw_8000")
    config = ElevenLabsConfig.resolve("v1", options)
    url = config.socket_url(multi=False)
    assert url.startswith("wss://api.elevenlabs.io/v1/text-to-speech/v1/stream-input?")
    assert "auto_mode=true" in url and "output_format=ulaw_8000" in url
    proxied = TtsOptions(spec="elevenlabs:v1", base_url="http://proxy.local:8080/eleven")
    url = ElevenLabsConfig.resolve("v1", proxied).socket_url(multi=True)
    assert url.startswith("ws://proxy.local:8080/eleven/v1/text-to-speech/v1/multi-stream-input?")
    assert "k" * 20 not in repr(config)


def test_the_registry_builds_both_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELEVENLABS_API_KEY", "k" * 20)
    socket = create_engine(TtsOptions(spec="elevenlabs:abc"), 22050)
    assert isinstance(socket, ElevenLabsSocketEngine) and socket.sample_rate == 22050
    http = create_engine("elevenlabs-http:abc", 44100)
    assert isinstance(http, ElevenLabsHttpEngine) and http.sample_rate == 44100
    monkeypatch.delenv("ELEVENLABS_API_KEY")
    with pytest.raises(ValueError, match="ELEVENLABS_API_KEY"):
        create_engine("elevenlabs:abc")

"""OpenAI speech (``openai:VOICE``) against FakeOpenAISpeech: a turn's pieces
spoken in text order with overlapping requests, every sample kept across odd
network chunks, and each fault a clear error."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import anyio
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tts_helpers import run_stream

from voice_membrane.testing.fake_openai_speech import RATE, FakeOpenAISpeech
from voice_membrane.testing.fake_speech import SpeechScript, encode, speak
from voice_membrane.testing.speech_check import analyze_speech, speech_problems
from voice_membrane.tts.base import TtsError, Voiced
from voice_membrane.tts.openai_speech import OpenAISpeechEngine, split_input
from voice_membrane.tts.options import TtsOptions
from voice_membrane.tts.pcm_carry import Pcm16Carry
from voice_membrane.tts.registry import create_engine
from voice_membrane.vocab.audio import Samples

PIECES = (
    "The quick brown fox jumps over the lazy dog.",
    "It was not in the mood for games.",
    "Then it went home.",
)
GUARD_S = 20  # against a hang, not a timing assertion


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAISpeech]:
    fake = FakeOpenAISpeech()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def fake(server: FakeOpenAISpeech, monkeypatch: pytest.MonkeyPatch) -> FakeOpenAISpeech:
    server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return server


def engine_for(
    fake: FakeOpenAISpeech, voice: str = "alloy", **options: object
) -> OpenAISpeechEngine:
    spec = f"openai:{voice}"
    engine = create_engine(TtsOptions(spec=spec, base_url=fake.base_url, **options))
    assert isinstance(engine, OpenAISpeechEngine)
    return engine


async def speak_turn(
    engine: OpenAISpeechEngine, pieces: tuple[str, ...], voiced: list[Voiced] | None = None
) -> list[Voiced]:
    """One turn from a started engine, closed after it."""
    await engine.start()
    try:
        return await run_stream(engine, pieces, voiced, limit_s=GUARD_S)
    finally:
        await engine.aclose()


async def fake_audio(text: str) -> Samples:
    """The samples the fake sends for ``text``."""
    pcm = encode(await speak(text), RATE)
    return np.frombuffer(pcm, dtype="<i2").astype(np.int16)


def samples_of(voiced: list[Voiced], piece: int | None = None) -> Samples:
    chosen = [v.audio.samples for v in voiced if piece is None or v.piece == piece]
    return np.concatenate(chosen) if chosen else np.zeros(0, np.int16)


# ---------------------------------------------------------------- speaking


@pytest.mark.anyio
async def test_a_turn_is_spoken_in_text_order_as_24khz_speech(fake: FakeOpenAISpeech) -> None:
    fake.add(*[SpeechScript(frame_ms=50)] * 3)
    voiced = await speak_turn(engine_for(fake, "coral"), PIECES)
    assert {v.audio.sample_rate for v in voiced} == {24000}
    order = [v.piece for v in voiced]
    assert order == sorted(order) and set(order) == {0, 1, 2}
    for index, piece in enumerate(PIECES):  # the right length: every sample of each piece
        assert np.array_equal(samples_of(voiced, index), await fake_audio(piece))
    report = analyze_speech(samples_of(voiced), 24000)
    assert speech_problems(report, " ".join(PIECES)) == []
    bodies = [r.body for r in fake.requests]
    assert sorted(b["input"] for b in bodies) == sorted(PIECES)  # two in flight: any arrival
    assert all(r.path == "/v1/audio/speech" for r in fake.requests)
    for body in bodies:
        assert body["model"] == "gpt-4o-mini-tts" and body["voice"] == "coral"
        assert body["response_format"] == "pcm"
        assert "instructions" not in body and "speed" not in body


@pytest.mark.anyio
async def test_one_at_a_time_the_service_hears_the_pieces_in_order(
    fake: FakeOpenAISpeech,
) -> None:
    voiced = await speak_turn(engine_for(fake, model="tts-1", speed=1.25, max_in_flight=1), PIECES)
    assert [r.body["input"] for r in fake.requests] == list(PIECES)
    assert {(r.body["model"], r.body["speed"]) for r in fake.requests} == {("tts-1", 1.25)}
    assert [v.piece for v in voiced] == sorted(v.piece for v in voiced)


@pytest.mark.anyio
async def test_instructions_are_sent_to_models_that_take_them(fake: FakeOpenAISpeech) -> None:
    await speak_turn(engine_for(fake, instructions="Calm and slow."), PIECES[:1])
    assert fake.requests[0].body["instructions"] == "Calm and slow."


@pytest.mark.anyio
async def test_the_next_request_overlaps_a_slow_first_yet_audio_keeps_text_order(
    fake: FakeOpenAISpeech,
) -> None:
    fake.add(SpeechScript(ttfb_s=0.5), SpeechScript())  # the first request to arrive is slow
    received_at_first_audio: list[int] = []
    engine = engine_for(fake, max_in_flight=2)
    voiced: list[Voiced] = []
    with anyio.fail_after(GUARD_S):
        await engine.start()
        async with engine.open_stream() as stream:
            await stream.push(PIECES[0])
            await stream.push(PIECES[1])
            await stream.end_input()
            async for item in stream:
                if not voiced:
                    received_at_first_audio.append(len(fake.requests))
                voiced.append(item)
        await engine.aclose()
    # The second request reached the service before the first produced audio.
    assert received_at_first_audio == [2]
    order = [v.piece for v in voiced]
    assert order == sorted(order) and set(order) == {0, 1}
    assert np.array_equal(samples_of(voiced, 0), await fake_audio(PIECES[0]))
    assert np.array_equal(samples_of(voiced, 1), await fake_audio(PIECES[1]))


@pytest.mark.anyio
async def test_odd_sized_network_chunks_lose_no_sample(fake: FakeOpenAISpeech) -> None:
    fake.add(SpeechScript(char_s=0.003, frame_ms=30))  # paced: chunks arrive one by one
    voiced = await speak_turn(engine_for(fake), PIECES[:1])
    assert len(voiced) > 3  # it did arrive in many chunks
    assert np.array_equal(samples_of(voiced), await fake_audio(PIECES[0]))


@pytest.mark.anyio
async def test_a_piece_over_the_input_limit_is_split_at_sentence_ends(
    fake: FakeOpenAISpeech,
) -> None:
    engine = engine_for(fake, max_in_flight=1)
    engine.max_input = 50  # the API's 4096, scaled down
    text = " ".join(PIECES)
    voiced = await speak_turn(engine, (text,))
    assert [r.body["input"].strip() for r in fake.requests] == list(PIECES)
    assert {v.piece for v in voiced} == {0}
    expected = [await fake_audio(r.body["input"]) for r in fake.requests]
    assert np.array_equal(samples_of(voiced), np.concatenate(expected))


# ---------------------------------------------------------------- faults


@pytest.mark.anyio
async def test_a_refused_key_names_the_variable_to_set(
    fake: FakeOpenAISpeech, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-0123456789")
    with pytest.raises(TtsError, match="set OPENAI_API_KEY to a valid") as refused:
        await speak_turn(engine_for(fake), PIECES[:1])
    assert "sk-wrong" not in str(refused.value) and not refused.value.retryable
    monkeypatch.setenv("MY_SPEECH_KEY", "sk-wrong-key-0123456789")
    with pytest.raises(TtsError, match="set MY_SPEECH_KEY to a valid"):
        await speak_turn(engine_for(fake, api_key_env="MY_SPEECH_KEY"), PIECES[:1])
    assert len(fake.requests) == 2  # refused once each, not retried


@pytest.mark.anyio
async def test_an_unknown_voice_is_one_error_naming_it(fake: FakeOpenAISpeech) -> None:
    with pytest.raises(TtsError, match="unknown voice 'nobody'") as raised:
        await speak_turn(engine_for(fake, "nobody"), PIECES)
    assert len(fake.requests) <= 2  # at most the requests already in flight, none retried
    assert "\n" not in str(raised.value)


@pytest.mark.anyio
async def test_an_unknown_model_is_one_error_naming_it(fake: FakeOpenAISpeech) -> None:
    with pytest.raises(TtsError, match="unknown model 'tts-9'"):
        await speak_turn(engine_for(fake, model="tts-9"), PIECES[:1])


@pytest.mark.anyio
@pytest.mark.parametrize(
    "failure",
    [
        SpeechScript.http_error(429, retry_after=0.01),
        SpeechScript.http_error(502, retry_after=0.01),
        SpeechScript.drop(after_frames=0),
    ],
    ids=["429", "502", "drop"],
)
async def test_a_failure_before_the_first_audio_is_retried(
    fake: FakeOpenAISpeech, failure: SpeechScript
) -> None:
    fake.add(failure)
    voiced = await speak_turn(engine_for(fake), PIECES[:1])
    assert np.array_equal(samples_of(voiced), await fake_audio(PIECES[0]))
    assert [r.body["input"] for r in fake.requests] == [PIECES[0]] * 2


@pytest.mark.anyio
async def test_a_service_that_cannot_be_reached_is_retried_then_named() -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    options = TtsOptions(spec="openai:alloy", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
    engine = OpenAISpeechEngine("alloy", options)
    with (
        pytest.MonkeyPatch.context() as env,
        pytest.raises(TtsError, match=rf"connection.*127\.0\.0\.1:{port}.*after 2 attempts"),
    ):
        env.setenv("OPENAI_API_KEY", "sk-test")
        await speak_turn(engine, PIECES[:1])


@pytest.mark.anyio
async def test_a_blank_piece_sends_no_request(fake: FakeOpenAISpeech) -> None:
    voiced = await speak_turn(engine_for(fake), (" \n ",))
    assert voiced == [] and fake.requests == []


@pytest.mark.anyio
async def test_retries_run_out_into_one_clear_error(fake: FakeOpenAISpeech) -> None:
    fake.add(*[SpeechScript.http_error(503, retry_after=0.01)] * 2)
    with pytest.raises(TtsError, match=r"HTTP 503.*\(after 2 attempts\)"):
        await speak_turn(engine_for(fake, max_retries=1), PIECES[:1])
    assert len(fake.requests) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("after_frames", [0, 2])
async def test_a_stalled_service_is_a_read_timeout_error_after_the_audio_before_it(
    fake: FakeOpenAISpeech, after_frames: int
) -> None:
    stall = SpeechScript.stall(after_frames=after_frames, char_s=0.003)
    fake.add(SpeechScript(frame_ms=50), stall)
    engine = engine_for(fake, read_timeout_s=0.3, max_in_flight=1)
    voiced: list[Voiced] = []
    with pytest.raises(TtsError, match=r"no audio from the service for 0.3 s"):
        await speak_turn(engine, PIECES[:2], voiced)
    assert np.array_equal(samples_of(voiced, 0), await fake_audio(PIECES[0]))
    # What came before the stall was kept.
    assert (len(samples_of(voiced, 1)) > 0) == (after_frames > 0)
    # Not retried (a retry would get a normal script and succeed): in a live turn
    # each retry would add read_timeout_s of silence.
    assert len(fake.requests) == 2


@pytest.mark.anyio
async def test_a_dropped_body_after_audio_is_an_error_not_a_repeat(
    fake: FakeOpenAISpeech,
) -> None:
    fake.add(SpeechScript.drop(after_frames=2, char_s=0.003))
    with pytest.raises(TtsError, match="connection"):
        await speak_turn(engine_for(fake), PIECES[:1])
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_an_interruption_closes_the_request_and_leaves_no_task(
    fake: FakeOpenAISpeech,
) -> None:
    fake.add(SpeechScript(char_s=0.05, frame_ms=20))  # seconds of paced audio
    engine = engine_for(fake)
    with anyio.fail_after(GUARD_S):
        await engine.start()
        tasks_before = len(asyncio.all_tasks())
        async with engine.open_stream() as stream:
            await stream.push(PIECES[0])
            await stream.end_input()
            async for _ in stream:
                break  # the user barged in at the first audio
        assert stream.stats.cancelled_requests == 1
        assert len(asyncio.all_tasks()) == tasks_before
        while fake.early_closes == 0:  # the server notices the closed connection
            await anyio.sleep(0.01)
        await engine.aclose()
    assert fake.early_closes == 1


@pytest.mark.anyio
async def test_a_consumer_that_stops_between_chunks_closes_the_request(
    fake: FakeOpenAISpeech,
) -> None:
    """The engine's generator left at a ``yield`` (the piece's buffer was full when
    the turn was cut) drops the connection, not only a cancelled network read."""
    fake.add(SpeechScript(char_s=0.05, frame_ms=20))
    engine = engine_for(fake)
    with anyio.fail_after(GUARD_S):
        await engine.start()
        chunks = engine.synthesize(PIECES[0])
        await anext(chunks)
        await chunks.aclose()
        while fake.early_closes == 0:
            await anyio.sleep(0.01)
        await engine.aclose()
    assert fake.early_closes == 1


# ---------------------------------------------------------------- configuration


def test_configuration_errors_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="instructions is not supported by tts-1-hd"):
        create_engine(TtsOptions(spec="openai:alloy", model="tts-1-hd", instructions="Calm."))
    with pytest.raises(ValueError, match="output_format pcm_16000 is an ElevenLabs format"):
        create_engine(TtsOptions(spec="openai:alloy", output_format="pcm_16000"))
    with pytest.raises(ValueError, match="unknown TTS engine 'openai:'"):
        create_engine("openai:")
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ValueError, match="no API key: set OPENAI_API_KEY"):
        create_engine("openai:alloy")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "ftp://example.com")
    with pytest.raises(ValueError, match=r"OPENAI_BASE_URL 'ftp://example\.com'"):
        create_engine("openai:alloy")


def test_the_engine_describes_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    engine = create_engine(TtsOptions(spec="openai:voice_123", max_in_flight=3))
    assert isinstance(engine, OpenAISpeechEngine)
    assert (engine.name, engine.sample_rate, engine.local) == ("openai:voice_123", 24000, False)
    assert engine.billed and engine.max_in_flight == 3 and engine.model == "gpt-4o-mini-tts"
    assert engine.body("Hi.")["voice"] == {"id": "voice_123"}  # a custom voice goes by id


@pytest.mark.anyio
async def test_start_checks_the_key_without_a_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    engine = OpenAISpeechEngine("alloy")
    with pytest.raises(TtsError, match="no API key: set OPENAI_API_KEY"):
        await engine.start()


# ---------------------------------------------------------------- sans-I/O parts


@given(st.binary(max_size=400).map(lambda b: b[: len(b) // 2 * 2]), st.data())
def test_any_split_into_chunks_gives_the_same_samples(data: bytes, draw: st.DataObject) -> None:
    cuts = sorted(draw.draw(st.lists(st.integers(0, len(data)), max_size=12)))
    carry = Pcm16Carry()
    pieces = [carry.feed(data[a:b]) for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    assert carry.leftover == 0
    expected = np.frombuffer(data, dtype="<i2")
    assert np.array_equal(np.concatenate(pieces), expected)


def test_a_trailing_odd_byte_waits_and_is_the_only_thing_left() -> None:
    carry = Pcm16Carry()
    assert carry.feed(b"\x01").size == 0 and carry.leftover == 1
    assert carry.feed(b"\x02\x03").tolist() == [0x0201] and carry.leftover == 1


_TEXT = st.text(st.sampled_from("ab .!?\n\u2019"), max_size=300)


@given(_TEXT, st.integers(1, 60))
def test_split_input_keeps_every_character_within_the_limit(text: str, limit: int) -> None:
    parts = split_input(text, limit)
    assert "".join(parts) == text
    assert all(len(part) <= limit for part in parts)


def test_split_input_prefers_sentence_ends_then_spaces() -> None:
    assert split_input("One two. Three four. Five", 21) == ["One two. Three four. ", "Five"]
    assert split_input("One two three four", 10) == ["One two ", "three four"]
    assert split_input("abcdefghij", 4) == ["abcd", "efgh", "ij"]

"""The ElevenLabs socket engine against FakeElevenLabs: speech in text order with
per-piece alignment, flushing, multi-context reuse, interruption, reconnects,
errors and the HTTP fallback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from tts_helpers import PIECES, piece_chars, run_stream, samples_of, task_count, tasks_settle

from voice_membrane.testing.fake_elevenlabs import FakeElevenLabs
from voice_membrane.testing.fake_speech import SpeechScript
from voice_membrane.testing.speech_check import analyze_speech, speech_problems
from voice_membrane.tts.base import TtsError, Voiced
from voice_membrane.tts.elevenlabs_ws import ElevenLabsSocketEngine
from voice_membrane.tts.options import TtsOptions

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


def engine(**options: Any) -> ElevenLabsSocketEngine:
    options.setdefault("read_timeout_s", 3.0)
    return ElevenLabsSocketEngine(
        "fake-voice", TtsOptions(spec="elevenlabs:fake-voice", **options), 16000
    )


def texts(message_list: list[Any]) -> str:
    return "".join(m.get("text") or "" for m in message_list if isinstance(m, dict))


@pytest.mark.parametrize(
    ("fmt", "rate"), [(None, 16000), ("pcm_24000", 24000), ("ulaw_8000", 8000)]
)
async def test_speaks_the_pieces_in_order_with_their_alignment(
    server: FakeElevenLabs, fmt: str | None, rate: int
) -> None:
    tts = engine(output_format=fmt)
    await tts.start()
    try:
        voiced = await run_stream(tts, PIECES)
    finally:
        await tts.aclose()
    assert tts.sample_rate == rate
    assert all(v.audio.sample_rate == rate for v in voiced)
    assert [v.piece for v in voiced] == sorted(v.piece for v in voiced)  # text order
    audio = samples_of(voiced)
    text = " ".join(PIECES)
    assert speech_problems(analyze_speech(audio, rate), text) == []
    # Each piece's audio carries exactly the characters sent for it.
    for i, piece in enumerate(PIECES):
        assert piece_chars(voiced, i) == piece + " "
    # The fake received each piece once, in order (the initial space first).
    (conn,) = server.connections
    assert conn.text == " " + "".join(p + " " for p in PIECES)
    assert conn.query["output_format"] == (fmt or "pcm_16000")
    assert conn.query["sync_alignment"] == "true"
    with anyio.fail_after(5):  # closed: the fake's thread sees it a moment later
        while server.open_connections:
            await anyio.sleep(0.01)


async def test_the_first_piece_is_flushed_and_text_never_waits_in_the_buffer(
    server: FakeElevenLabs,
) -> None:
    """A 120-character schedule would hold a short first sentence until the end
    of input: flushed, it is generated on its own, at once."""
    tts = engine()
    got: list[Voiced] = []
    with anyio.fail_after(10):
        async with tts.open_stream() as stream:
            await stream.push(PIECES[0])
            async for voiced in stream:  # all its audio before more text or end_input
                got.append(voiced)
                if piece_chars(got, 0) == PIECES[0] + " ":
                    break
            await stream.push(PIECES[1])
            await stream.end_input()
            async for voiced in stream:
                got.append(voiced)
    await tts.aclose()
    (conn,) = server.connections
    first = conn.messages[1]
    assert first == {"text": PIECES[0] + " ", "flush": True}
    # The service was idle when the second piece came: flushed too.
    assert conn.messages[2] == {"text": PIECES[1] + " ", "flush": True}
    assert conn.generations[0] == ("", " " + PIECES[0] + " ")
    assert piece_chars(got, 1) == PIECES[1] + " "


async def test_text_sent_while_the_service_speaks_is_not_left_in_its_buffer(
    server: FakeElevenLabs,
) -> None:
    """A piece that comes while the previous one is still being voiced goes
    without a flush (the service may voice it with what follows); once the
    service has voiced everything flushed, a bare flush starts it on that piece,
    without waiting for more text or the end of the turn."""
    server.add(SpeechScript(char_s=0.01))  # paced: the first piece takes a while
    tts = engine()
    got: list[Voiced] = []
    with anyio.fail_after(10):
        async with tts.open_stream() as stream:
            await stream.push(PIECES[0])
            async for voiced in stream:
                got.append(voiced)
                break
            await stream.push(PIECES[1])  # the service is busy with the first
            async for voiced in stream:
                got.append(voiced)
                if piece_chars(got, 1) == PIECES[1] + " ":
                    break  # voiced with no end of input
            await stream.end_input()
            got.extend([v async for v in stream])
    await tts.aclose()
    (conn,) = server.connections
    assert conn.messages[2] == {"text": PIECES[1] + " ", "flush": False}
    assert {"text": " ", "flush": True} in conn.messages[3:]
    assert [piece_chars(got, i) for i in (0, 1)] == [PIECES[0] + " ", PIECES[1] + " "]


async def test_multi_context_reuses_the_socket_and_closes_an_interrupted_context(
    server: FakeElevenLabs,
) -> None:
    tts = engine(multi_context=True)
    await tts.start()
    try:
        async with tts.open_stream() as first:
            await first.push(PIECES[0])
            await first.end_input()
            first_audio = [v async for v in first]
        assert first.stats.reused_connection is False
        async with tts.open_stream() as second:
            await second.push(PIECES[1])
            async for _ in second:
                break  # interrupted after the first audio
        assert second.stats.reused_connection is True
        assert second.stats.cancelled_requests == 1
        assert server.open_connections == 1
        with anyio.fail_after(5):
            while not any(m.get("close_context") for m in server.connections[0].messages[-2:]):
                await anyio.sleep(0.01)
    finally:
        await tts.aclose()
    assert first_audio and piece_chars(first_audio, 0) == PIECES[0] + " "
    (conn,) = server.connections  # one socket for both turns
    assert conn.path.endswith("/multi-stream-input")
    contexts = {m.get("context_id") for m in conn.messages if isinstance(m, dict)}
    assert {"turn-1", "turn-2"} <= contexts
    closes = [m["context_id"] for m in conn.messages if m.get("close_context")]
    assert closes == ["turn-1", "turn-2"]
    with anyio.fail_after(5):
        while server.open_connections:
            await anyio.sleep(0.01)


async def test_interruption_closes_the_socket_and_leaves_no_task(server: FakeElevenLabs) -> None:
    server.add(SpeechScript(char_s=0.02))  # slow audio: the turn is cut mid-speech
    tts = engine()
    before = task_count()
    with anyio.fail_after(10):
        async with tts.open_stream() as stream:
            for piece in PIECES:
                await stream.push(piece)
            async for _ in stream:
                break
    assert stream.stats.cancelled_requests == 1
    with anyio.fail_after(5):
        while server.open_connections:
            await anyio.sleep(0.01)
    assert server.connections[0].client_closed
    assert await tasks_settle(before)
    await tts.aclose()


async def test_a_dropped_socket_is_reopened_once_and_only_unvoiced_text_resent(
    server: FakeElevenLabs,
) -> None:
    server.add(SpeechScript.drop(after_frames=4, char_s=0.002))
    tts = engine()
    voiced = await run_stream(tts, PIECES)
    await tts.aclose()
    first, second = server.connections
    assert first.dropped
    heard = [piece_chars(voiced, i) for i in range(len(PIECES))]
    assert heard == [p + " " for p in PIECES]  # nothing lost, nothing twice
    full = "".join(p + " " for p in PIECES)
    resent = texts(second.messages).strip()
    # The second connection got only the tail the first had not voiced.
    assert resent and full.endswith(resent + " ") and len(resent) < len(full.strip())
    assert first.frames_sent == 4


async def test_a_second_drop_is_an_error(server: FakeElevenLabs) -> None:
    server.add(SpeechScript.drop(after_frames=1), SpeechScript.drop(after_frames=1))
    tts = engine()
    with pytest.raises(TtsError, match="twice"):
        await run_stream(tts, PIECES)
    await tts.aclose()


async def test_a_bad_key_names_the_variable_to_set(
    server: FakeElevenLabs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ELEVENLABS_API_KEY", "wrong-key-123456")
    tts = engine()
    with pytest.raises(TtsError, match="ELEVENLABS_API_KEY") as caught:
        await tts.start()
    assert "wrong-key" not in str(caught.value)
    # Over the socket itself (no start()): the service's error frame, same message.
    with pytest.raises(TtsError, match="ELEVENLABS_API_KEY"):
        await run_stream(tts, PIECES)
    await tts.aclose()


async def test_an_unknown_voice_is_named(server: FakeElevenLabs) -> None:
    tts = ElevenLabsSocketEngine("no-such-voice", TtsOptions(spec="elevenlabs:no-such-voice"))
    with pytest.raises(TtsError, match="no-such-voice"):
        await tts.start()
    with pytest.raises(TtsError, match="no-such-voice"):
        await run_stream(tts, PIECES)
    await tts.aclose()


async def test_a_refused_handshake_is_retried(server: FakeElevenLabs) -> None:
    server.add(SpeechScript.http_error(429, retry_after=0.01))
    tts = engine(max_retries=2)
    voiced = await run_stream(tts, PIECES[:1])
    await tts.aclose()
    assert piece_chars(voiced, 0) == PIECES[0] + " "
    assert len(server.connections) == 2
    assert tts.fallbacks == 0


async def test_a_stalled_service_is_a_read_timeout(server: FakeElevenLabs) -> None:
    server.add(SpeechScript.stall(after_frames=2))
    tts = engine(read_timeout_s=0.3)
    with pytest.raises(TtsError, match="read_timeout_s"):
        await run_stream(tts, PIECES, limit_s=10)
    await tts.aclose()


@pytest.mark.parametrize("breaks", ["json", "base64"])
async def test_a_malformed_frame_is_one_clear_error(server: FakeElevenLabs, breaks: str) -> None:
    server.add(SpeechScript.malformed(after_frames=2, breaks=breaks))  # type: ignore[arg-type]
    tts = engine()
    got = []
    with pytest.raises(TtsError, match=f"malformed.*{'JSON' if breaks == 'json' else 'base64'}"):
        async with tts.open_stream() as stream:
            for piece in PIECES:
                await stream.push(piece)
            await stream.end_input()
            async for voiced in stream:
                got.append(voiced)
    await tts.aclose()
    assert len(got) >= 2  # the audio before the bad frame was kept


async def test_keepalive_while_no_text_comes(server: FakeElevenLabs) -> None:
    """A turn whose LLM waits (on a tool) sends spaces to keep its socket alive,
    and they neither reach a piece's alignment nor lose its text."""
    tts = engine()
    tts.keepalive_s = 0.1
    with anyio.fail_after(10):
        async with tts.open_stream() as stream:
            await stream.push(PIECES[0])
            await anyio.sleep(0.5)  # the LLM waits on a tool
            await stream.push(PIECES[1])
            await stream.end_input()
            voiced = [v async for v in stream]
    await tts.aclose()
    (conn,) = server.connections
    assert conn.messages.count({"text": " "}) >= 3  # the initial one and keepalives
    assert [piece_chars(voiced, i) for i in (0, 1)] == [PIECES[0] + " ", PIECES[1] + " "]
    assert stream.stats.chars_billed == len(PIECES[0]) + len(PIECES[1]) + 2


async def test_the_http_route_speaks_when_the_socket_cannot_open(server: FakeElevenLabs) -> None:
    server.add(SpeechScript.http_error(503))  # the handshake
    tts = engine(max_retries=0)
    await tts.start()
    voiced = await run_stream(tts, PIECES)
    await tts.aclose()
    assert tts.fallbacks == 1
    assert {v.piece for v in voiced} == {0, 1, 2}
    posts = [r for r in server.requests if r.method == "POST"]
    assert sorted(r.body["text"] for r in posts) == sorted(PIECES)  # overlapping requests
    audio = samples_of(voiced)
    assert speech_problems(analyze_speech(audio, 16000), " ".join(PIECES)) == []

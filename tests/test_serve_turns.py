"""serve: whole turns over the WebSocket, interruption, concurrent sessions."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.serve_helpers import (
    GUARD_S,
    LONG_REPLY,
    SHORT_REPLY,
    SHORT_SPOKEN,
    SHORT_VISIBLE,
    TurnLog,
    read_turn,
    running_server,
    send,
    session,
    write_pipeline,
)
from voice_membrane.server import Server
from voice_membrane.server.protocol import FRAME_MS, unpack_frame
from voice_membrane.testing.fake_elevenlabs import FakeElevenLabs
from voice_membrane.vocab.audio import pcm16_from_bytes

pytestmark = pytest.mark.anyio


def words_prefix(heard: str, text: str) -> bool:
    """``heard`` is the first words of ``text`` (whole words, any punctuation kept)."""
    heard_words, words = heard.split(), text.split()
    return heard_words == words[: len(heard_words)]


def check_frames(log: TurnLog, turn: int, rate: int, first_sequence: int = 0) -> float:
    """Frames of ``turn`` numbered on without a gap, each 20 ms but the last; seconds."""
    frames = [f for f in log.frames if f[0] == turn]
    assert frames, "no audio"
    assert [seq for _, seq, _ in frames] == list(
        range(first_sequence, first_sequence + len(frames))
    )
    size = rate * FRAME_MS // 1000 * 2
    assert all(len(audio) == size for _, _, audio in frames[:-1])
    assert 0 < len(frames[-1][2]) <= size
    return sum(len(audio) for _, _, audio in frames) / 2 / rate


async def test_a_full_turn(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, session(server, pipeline="short") as ws:
        await send(ws, type="user.message", text="Hi!")
        log = await read_turn(ws)
        kinds = [e["type"] for e in log.events]
        assert kinds[0] == "turn.started" and kinds[-2:] == ["metrics", "turn.end"]
        assert log.of("turn.started")[0] == {
            "type": "turn.started",
            "turn": 1,
            "text": "Hi!",
            "source": "text",
        }
        seconds = check_frames(log, 1, 24000)
        samples = np.concatenate([pcm16_from_bytes(a) for _, _, a in log.frames])
        assert np.abs(samples).max() > 1000  # speech, not silence
        # Visible text only, as spoken (markdown filtered), nothing hidden.
        deltas = "".join(e["text"] for e in log.of("transcript.delta"))
        assert deltas.strip() == SHORT_SPOKEN
        hidden = log.of("log")
        assert "".join(e["text"] for e in hidden) == "The user greets me."
        assert {e["meta"]["type"] for e in hidden} == {"thinking"}
        assert not any(e["meta"]["visible"] for e in hidden)
        blocks = [(e["event"], e["block_type"]) for e in log.of("block")]
        assert blocks == [
            ("start", "thinking"),
            ("complete", "thinking"),
            ("start", "text"),
            ("complete", "text"),
        ]
        report = log.of("metrics")[0]["report"]
        assert report["sink"] == "websocket"
        assert report["counts"]["audio_seconds"] == pytest.approx(seconds, abs=0.05)
        assert report["stamps_ms"]["first_audio"] is not None
        end = log.end
        assert end == {
            "type": "turn.end",
            "turn": 1,
            "heard": SHORT_SPOKEN,
            "visible": SHORT_VISIBLE,
            "interrupted": False,
            "error": None,
            "terminated": None,
        }
        # The session goes on: a second turn numbers its frames on from the first's.
        await send(ws, type="user.message", text="Again")
        second = await read_turn(ws)
        check_frames(second, 2, 24000, first_sequence=len(log.frames))


@pytest.mark.parametrize(
    ("audio", "rate", "width"),
    [({"encoding": "pcm16", "sample_rate": 16000}, 16000, 2), ({"encoding": "mulaw"}, 8000, 1)],
)
async def test_the_audio_format_asked_for(
    tmp_path: Path, audio: dict[str, object], rate: int, width: int
) -> None:
    async with running_server(tmp_path) as server, session(server, audio=audio) as ws:
        await send(ws, type="user.message", text="Hi!")
        log = await read_turn(ws)
        report = log.of("metrics")[0]["report"]
        frames = log.frames
        assert all(len(a) == rate * FRAME_MS // 1000 * width for _, _, a in frames[:-1])
        total = sum(len(a) for _, _, a in frames) / width / rate
        assert total == pytest.approx(report["counts"]["audio_seconds"], abs=0.05)


@pytest.mark.parametrize(
    ("audio", "rate", "width", "asked"),
    [
        ({"encoding": "pcm16", "sample_rate": 16000}, 16000, 2, "pcm_16000"),
        ({"encoding": "mulaw", "sample_rate": 8000}, 8000, 1, "ulaw_8000"),  # a phone call
    ],
)
async def test_a_cloud_voice_is_asked_for_the_sessions_format(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    audio: dict[str, object],
    rate: int,
    width: int,
    asked: str,
) -> None:
    # Asked for 16 kHz, the ElevenLabs socket speaks pcm_16000, and for μ-law 8 kHz
    # ulaw_8000: nothing is resampled (the engine used to be made for the speaker's
    # 22.05 kHz and resampled per session), and the report says so.
    with FakeElevenLabs() as fake:
        for name, value in fake.env().items():
            monkeypatch.setenv(name, value)
        path = write_pipeline(tmp_path, "cloud", SHORT_REPLY, tts="elevenlabs:fake-voice")
        async with (
            Server([path], port=0, log=lambda *args, **fields: None) as server,
            session(server, audio=audio) as ws,
        ):
            await send(ws, type="user.message", text="Hi!")
            log = await read_turn(ws)
        assert log.end["error"] is None and log.end["heard"] == SHORT_SPOKEN
        assert all(len(a) == rate * FRAME_MS // 1000 * width for _, _, a in log.frames[:-1])
        assert [c.query["output_format"] for c in fake.connections] == [asked]
        counts = log.of("metrics")[0]["report"]["counts"]
        assert counts["audio_seconds"] > 0.5 and counts["audio_resampled_seconds"] == 0


async def test_the_report_counts_the_audio_resampled(tmp_path: Path) -> None:
    # espeak-ng speaks 22.05 kHz: a 24 kHz session resamples all of it.
    async with running_server(tmp_path) as server, session(server, pipeline="short") as ws:
        await send(ws, type="user.message", text="Hi!")
        counts = (await read_turn(ws)).of("metrics")[0]["report"]["counts"]
    assert counts["audio_resampled_seconds"] == pytest.approx(counts["audio_seconds"], abs=0.01)


async def test_session_started_names_the_format(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, connect(server.ws_url) as ws:
        await send(ws, type="session.start", v=1, audio={"encoding": "mulaw"})
        started = json.loads(await ws.recv())
    assert started["protocol"] == 1
    assert started["pipeline"] == "short"  # the first pipeline is the default
    assert started["pipelines"] == ["short", "long"]
    assert set(started["descriptions"]) == {"short", "long"}  # each one's, "" for none
    assert started["tts"] == "espeak" and started["llm"].startswith("replay:")
    assert started["audio"] == {"encoding": "mulaw", "sample_rate": 8000, "frame_ms": 20}


async def interrupt_after(ws: ClientConnection, seconds: float) -> TurnLog:
    """Read the turn's audio until ``seconds`` of it arrived, interrupt, read to the end."""
    log = TurnLog()
    received = 0.0
    with anyio.fail_after(GUARD_S):
        while received < seconds:
            data = await ws.recv()
            if isinstance(data, bytes):
                log.frames.append(unpack_frame(data))
                received += (len(data) - 8) / 2 / 24000
            else:
                log.events.append(json.loads(data))
    await send(ws, type="interrupt")
    return await read_turn(ws, log)


async def test_interrupt_mid_speech(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, session(server, pipeline="long") as ws:
        await send(ws, type="user.message", text="Tell me about the weather")
        log = await interrupt_after(ws, 1.5)
        end = log.end
        assert end["interrupted"] is True and end["error"] is None
        assert end["visible"] == LONG_REPLY
        heard = end["heard"]
        assert heard and words_prefix(heard, LONG_REPLY)
        assert len(heard) < len(LONG_REPLY) / 2
        # The audio stopped: far less than the reply's ~15 s was sent, and nothing
        # of the turn comes after its end.
        sent = sum(len(a) for _, _, a in log.frames) / 2 / 24000
        assert sent < 4.0
        await send(ws, type="user.message", text="Go on")  # the session goes on
        nxt = await interrupt_after(ws, 0.3)
        assert nxt.frames and all(turn == 2 for turn, _, _ in nxt.frames)
        assert nxt.end["turn"] == 2


async def test_two_sessions_one_interrupted(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server:
        results: dict[str, TurnLog] = {}

        async def calm() -> None:
            async with session(server, pipeline="short") as ws:
                await send(ws, type="user.message", text="Hi!")
                results["calm"] = await read_turn(ws)

        async def interrupted() -> None:
            async with session(server, pipeline="long") as ws:
                await send(ws, type="user.message", text="Weather?")
                results["cut"] = await interrupt_after(ws, 0.5)

        async with anyio.create_task_group() as tg:
            tg.start_soon(calm)
            tg.start_soon(interrupted)
    assert results["cut"].end["interrupted"] is True
    calm_end = results["calm"].end
    assert calm_end["interrupted"] is False and calm_end["heard"] == SHORT_SPOKEN
    check_frames(results["calm"], 1, 24000)


@pytest.mark.parametrize("frame_ms", [40, 60])
async def test_a_client_may_ask_for_longer_frames(tmp_path: Path, frame_ms: int) -> None:
    """Protocol 1.2: ``audio.frame_ms`` 20, 40 or 60; the reply comes in frames of
    that length (shorter only at the turn's start, while the client holds
    little, and the last), numbered as ever."""
    async with running_server(tmp_path) as server, connect(server.ws_url) as ws:
        audio = {"encoding": "pcm16", "sample_rate": 16000, "frame_ms": frame_ms}
        await send(ws, type="session.start", v=1, pipeline="short", audio=audio)
        started = json.loads(await ws.recv())
        assert started["audio"] == audio and started["protocol_version"] == "1.2"
        await send(ws, type="user.message", text="Hi!")
        log = await read_turn(ws)
    frames = [f for f in log.frames if f[0] == 1]
    assert [seq for _, seq, _ in frames] == list(range(len(frames)))
    size = 16000 * frame_ms // 1000 * 2
    assert len(frames) > 2 and all(0 < len(a) <= size for _, _, a in frames)
    # (a short frame: the client held under 140 ms, so within the first half second)
    starts = np.cumsum([0] + [len(a) for _, _, a in frames]) / (16000 * 2)
    short = [i for i, (_, _, a) in enumerate(frames[:-1]) if len(a) != size]
    assert all(starts[i] < 0.5 for i in short)
    assert len(short) < len(frames) - 2  # whole frames


@pytest.mark.parametrize("frame_ms", [10, 30, 80, 100])
async def test_a_frame_length_past_the_pacing_batch_is_refused(
    tmp_path: Path, frame_ms: int
) -> None:
    async with running_server(tmp_path) as server, connect(server.ws_url) as ws:
        await send(ws, type="session.start", v=1, audio={"frame_ms": frame_ms})
        error = json.loads(await ws.recv())
        assert error["type"] == "error" and error["code"] == "bad_message", error
        assert "frame_ms" in error["message"]
        await send(ws, type="session.start", v=1, audio={"frame_ms": 60})  # may try again
        assert json.loads(await ws.recv())["audio"]["frame_ms"] == 60

"""A served session that listens (protocol 1.1), with real speech sent in real
time: the client's voice becomes turns, the listening events arrive, speech over
the reply pauses and interrupts it, push to talk, and the faults of input audio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import soundfile as sf
from serve_helpers import LONG_REPLY, SHORT_SPOKEN, next_event, send, start
from serve_voice_helpers import clip, listening_pipelines, silence, speak
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from voice_membrane.server import Server
from voice_membrane.server.protocol import MAX_INPUT_FRAME_S
from voice_membrane.server.voice_input import AUDIO_BURST_S, AUDIO_PATIENCE_S

pytest.importorskip("pocketsphinx")
pytestmark = pytest.mark.anyio

VOICE_IN = {"encoding": "pcm16", "sample_rate": 16000, "frame_ms": 20}


def _server(folder: Path, **options: Any) -> Server:
    options.setdefault("log", lambda *args, **fields: None)
    return Server(listening_pipelines(folder), port=0, **options)


async def test_a_spoken_question_is_answered_and_stop_interrupts_it(tmp_path: Path) -> None:
    question = np.concatenate([silence(0.3), clip("weather")])
    async with _server(tmp_path) as server, connect(server.ws_url) as ws:
        started = await start(ws, pipeline="voice", input_audio=VOICE_IN)
        assert started["input_audio"] == VOICE_IN and started["turn_taking"] == "vad"
        assert started["protocol_version"] == "1.2"
        assert started["listening"] == {"voice": True, "brief": True, "deaf": False}

        # The question, then silence until the answer has played a while.
        got = await speak(ws, question, until=lambda r: len(r.frames) >= 200)  # 4 s of it
        kinds = [e["type"] for e in got.events]
        assert kinds.index("vad.speech_start") < kinds.index("vad.speech_end")
        assert kinds.index("transcript.partial") < kinds.index("transcript.final")
        final = got.of("transcript.final")[0]
        assert "weather" in final["text"]
        assert 0 < final["start_ms"] < final["end_ms"] <= 2300
        turn = got.of("turn.started")[0]
        assert turn == {"type": "turn.started", "turn": 1, "text": final["text"], "source": "voice"}
        assert kinds.index("transcript.final") < kinds.index("turn.started")
        assert {t for t, _, _ in got.frames} == {1}

        # "stop" over the answer: paused, then interrupted; "stop" is the next turn.
        stop = np.concatenate([clip("stop"), silence(1.5)])
        got = await speak(ws, stop, until=lambda r: r.turn_end(2) is not None)
        actions = [e["action"] for e in got.of("barge_in") if e["turn"] == 1]
        assert actions[0] == "pause" and actions[-1] == "interrupt"
        end = got.turn_end(1)
        assert end is not None and end["interrupted"]
        assert end["heard"] and LONG_REPLY.startswith(end["heard"].strip())
        assert len(end["heard"]) < len(LONG_REPLY)
        metrics = next(e for e in got.of("metrics") if e["turn"] == 1)["report"]
        v2v = metrics["voice_to_voice"]
        assert v2v["voice_to_voice_ms"] > v2v["endpointing_ms"] > 0
        assert metrics["heard"]["text"] == final["text"]
        assert [p["outcome"] for p in metrics["playout_pauses"]] == ["interrupted"]
        second = next(e for e in got.of("turn.started") if e["turn"] == 2)
        assert second["source"] == "voice" and second["text"]
    metrics_text = server.state.metrics.render().decode()  # type: ignore[union-attr]
    assert "voice_membrane_voice_to_voice_seconds_count 2.0" in metrics_text


async def test_typed_turns_still_work_in_a_listening_session(tmp_path: Path) -> None:
    async with _server(tmp_path) as server, connect(server.ws_url) as ws:
        await start(ws, pipeline="brief", input_audio=VOICE_IN)
        await send(ws, type="user.message", text="Hi!")
        got = await speak(ws, silence(0.0), until=lambda r: r.turn_end(1) is not None)
        assert got.turn_end(1)["heard"] == SHORT_SPOKEN  # type: ignore[index]
        assert got.of("turn.started")[0]["source"] == "text"


async def test_push_to_talk(tmp_path: Path) -> None:
    async with _server(tmp_path) as server, connect(server.ws_url) as ws:
        started = await start(
            ws, pipeline="voice", input_audio=VOICE_IN, turn_taking="push_to_talk"
        )
        assert started["turn_taking"] == "push_to_talk"
        # Speech before the press is nobody's: no transcript, no turn.
        got = await speak(ws, np.concatenate([clip("stop"), silence(1.0)]))
        assert not got.of("transcript.final") and not got.of("vad.speech_start")
        await send(ws, type="input.start")
        question = np.concatenate([silence(0.2), clip("weather"), silence(0.1)])
        await speak(ws, question)
        await send(ws, type="input.end")  # and nothing more is sent: the turn still comes
        with anyio.fail_after(60):
            while (event := await next_event(ws))["type"] != "turn.started":
                pass
        assert "weather" in event["text"] and event["source"] == "voice"
        # Pressing again while the answer plays stops it at once.
        with anyio.fail_after(60):
            frames = 0
            while frames < 50:
                frames += isinstance(await ws.recv(), bytes)
        await send(ws, type="input.start")
        with anyio.fail_after(30):
            events = []
            while (event := await next_event(ws))["type"] != "turn.end":
                events.append(event)
        assert event["interrupted"]
        assert {"type": "barge_in", "turn": 1, "action": "interrupt"} in events
        await send(ws, type="input.end")  # (empty: no turn, no error)
        await send(ws, type="input.end")
        error = await next_event(ws)
        assert error["code"] == "bad_message" and "without input.start" in error["message"]


async def test_a_pipeline_that_does_not_listen_takes_no_audio(tmp_path: Path) -> None:
    async with _server(tmp_path) as server, connect(server.ws_url) as ws:
        started = await start(ws, pipeline="deaf", input_audio=VOICE_IN)
        assert started["input_audio"] is None and started["turn_taking"] is None
        await ws.send(silence(0.02).tobytes())
        error = await next_event(ws)
        assert error["code"] == "bad_message" and "takes no audio" in error["message"]
        await send(ws, type="input.start")
        error = await next_event(ws)
        assert error["code"] == "bad_message" and "does not push to talk" in error["message"]
        await send(ws, type="user.message", text="Hi!")  # typing still works
        while (event := await next_event(ws))["type"] != "turn.end":
            pass
        assert event["heard"] == SHORT_SPOKEN


@pytest.mark.parametrize(
    ("input_audio", "says"),
    [
        ({"encoding": "mulaw", "sample_rate": 16000}, "mulaw input is 8000 Hz"),
        ({"encoding": "opus"}, "encoding"),
        ({"sample_rate": 44100}, "sample_rate"),
        ({"frame_ms": 25}, "frame_ms"),
        ({"frame_ms": 1000}, "frame_ms"),
    ],
)
async def test_a_wrong_input_audio_is_refused_before_the_session(
    tmp_path: Path, input_audio: dict[str, Any], says: str
) -> None:
    async with _server(tmp_path) as server, connect(server.ws_url) as ws:
        await ws.send(silence(0.02).tobytes())  # audio before session.start
        error = await next_event(ws)
        assert error["code"] == "bad_message" and "audio" in error["message"]
        await send(ws, type="session.start", pipeline="voice", input_audio=input_audio)
        error = await next_event(ws)
        assert error["code"] == "bad_message" and says in error["message"], error
        started = await start(ws, pipeline="voice", input_audio=VOICE_IN)  # may try again
        assert started["input_audio"] == VOICE_IN


async def test_bad_frames_are_refused_and_listening_goes_on(tmp_path: Path) -> None:
    async with _server(tmp_path) as server, connect(server.ws_url) as ws:
        await start(ws, pipeline="brief", input_audio=VOICE_IN)
        await ws.send(b"\x00\x01\x02")  # half a sample
        error = await next_event(ws)
        assert error["code"] == "bad_message" and "even number of bytes" in error["message"]
        await anyio.sleep(1.05)  # (bad frames are answered once a second)
        await ws.send(silence(0.25).tobytes())  # over 200 ms in one frame
        error = await next_event(ws)
        assert error["code"] == "bad_message" and "at most 200 ms" in error["message"]
        await send(ws, type="input.start")  # not a push-to-talk session
        error = await next_event(ws)
        assert "does not push to talk" in error["message"]
        question = np.concatenate([silence(0.3), clip("weather")])
        got = await speak(ws, question, until=lambda r: bool(r.of("turn.started")))
        assert "weather" in got.of("turn.started")[0]["text"]


async def test_audio_faster_than_real_time_is_bounded_then_refused(tmp_path: Path) -> None:
    async with _server(tmp_path) as server, connect(server.ws_url) as ws:
        await start(ws, pipeline="brief", input_audio=VOICE_IN)
        frame = silence(0.1).tobytes()
        # At once: the burst and a frame are taken, the rest refused and, past the
        # patience, closed. (Twice as much as that: were the server's loop late
        # reading some of it, the frames that waited meanwhile are taken too.)
        ahead = AUDIO_BURST_S + MAX_INPUT_FRAME_S + AUDIO_PATIENCE_S
        with pytest.raises(ConnectionClosed) as closed:
            with anyio.fail_after(30):
                for _ in range(round(2 * ahead / 0.1)):
                    await ws.send(frame)
                error = await next_event(ws)
                assert error["code"] == "rate_limited"
                assert (
                    f"faster than real time: at most {AUDIO_BURST_S:g} s ahead"
                    in (error["message"])
                )
                while True:
                    await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


async def test_a_caller_who_hangs_up_mid_turn_leaves_nothing_running(tmp_path: Path) -> None:
    async with _server(tmp_path) as server:
        async with connect(server.ws_url) as ws:
            await start(ws, pipeline="voice", input_audio=VOICE_IN)
            question = np.concatenate([silence(0.3), clip("weather")])
            await speak(ws, question, until=lambda r: len(r.frames) >= 25)
        assert server.state is not None
        with anyio.fail_after(10):
            while server.state.sessions or server.state.turns_running:
                await anyio.sleep(0.05)


async def test_a_silent_caller_times_out(tmp_path: Path) -> None:
    async with _server(tmp_path, idle_timeout_s=1.0) as server, connect(server.ws_url) as ws:
        await start(ws, pipeline="brief", input_audio=VOICE_IN)
        got = await speak(ws, silence(0.0), until=lambda r: bool(r.of("error")), guard_s=20)
        assert got.of("error")[0]["code"] == "idle_timeout"  # audio of silence is not activity
        with pytest.raises(ConnectionClosed) as closed:
            with anyio.fail_after(10):
                while True:
                    await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4408


async def test_the_voice_is_written_only_to_a_debug_folder(tmp_path: Path) -> None:
    folder = tmp_path / "heard"
    audio = np.concatenate([silence(0.3), clip("weather"), silence(0.5)])
    async with _server(tmp_path, debug_audio_dir=folder) as server:
        async with connect(server.ws_url) as ws:
            started = await start(ws, pipeline="brief", input_audio=VOICE_IN)
            await speak(ws, audio)
        with anyio.fail_after(10):
            while server.state is not None and server.state.sessions:
                await anyio.sleep(0.05)
    written, rate = sf.read(folder / f"{started['session']}.wav", dtype="int16")
    assert rate == 16000
    np.testing.assert_array_equal(written, audio[: len(written)])
    assert len(written) >= len(audio) - 320  # all of it (the last frame may be in flight)

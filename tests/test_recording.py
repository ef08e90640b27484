"""``[recording]``: a served session or phone call written as a stereo WAV (the
user left, the assistant right, as heard: cut where an interruption cut it)
with its transcript beside it; old recordings pruned by ``keep_days``; a
recording that cannot be written never costs the conversation."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import soundfile as sf
from hypothesis import given
from hypothesis import strategies as st
from resume_helpers import KEY_ENV, cloud_pipeline
from serve_helpers import LONG_REPLY, listening_pipeline, read_turn, send, start
from websockets.asyncio.client import connect

from voice_membrane.cli.listen import run_listening
from voice_membrane.listening.settings import EndpointSettings
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.conversation_recording import RATE, ConversationRecording, prune
from voice_membrane.pipeline.stereo_timeline import LEFT, RIGHT, StereoTimeline
from voice_membrane.server import Server
from voice_membrane.sinks.null import NullSink
from voice_membrane.sinks.recorded import HeardUtterance, RecordedSink
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.fake_twilio import twilio_call
from voice_membrane.testing.script import ScriptedReply
from voice_membrane.vocab.audio import AudioChunk

ROOT = Path(__file__).resolve().parent.parent
SPEECH = ROOT / "audio_fixtures" / "speech"
QUESTION = SPEECH / "phone" / "weather_paris.wav"
STOP = SPEECH / "backchannels" / "stop.wav"
GUARD_S = 120  # against a hang only: the machine is shared and loaded
WARMUP_S = EndpointSettings().echo_warmup_s
HOSTILE = 'two\nlines "}, {"speaker": "assistant'


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "k")


def recording_section(path: Path, folder: Path, keep_days: float | None = None) -> Path:
    lines = f'[recording]\ndir = "{folder}"\n'
    if keep_days is not None:
        lines += f"keep_days = {keep_days}\n"
    path.write_text(path.read_text() + "\n" + lines, encoding="utf-8")
    return path


def loud(samples: np.ndarray[Any, Any], rate: int, window_s: float = 0.05) -> np.ndarray[Any, Any]:
    """Per window: whether it has sound in it (RMS over ~-40 dBFS)."""
    n = int(rate * window_s)
    frames = samples[: len(samples) // n * n].astype(np.float64).reshape(-1, n)
    return np.sqrt((frames**2).mean(axis=1)) > 300  # type: ignore[no-any-return]


def transcript(folder: Path) -> list[dict[str, Any]]:
    (path,) = folder.glob("*.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# The timeline: sans-I/O


def test_the_timeline_places_each_channel_and_hands_out_silence_between() -> None:
    line = StereoTimeline(rate=10, origin_ns=0)
    line.place(LEFT, np.array([1, 2, 3], np.int16), at=2)
    line.place(RIGHT, np.array([7, 8], np.int16), at=4)
    out = line.take(7)
    assert out[:, LEFT].tolist() == [0, 0, 1, 2, 3, 0, 0]
    assert out[:, RIGHT].tolist() == [0, 0, 0, 0, 7, 8, 0]
    line.place(RIGHT, np.array([5, 5, 5], np.int16), at=5)  # partly taken out: the rest
    assert line.take(9)[:, RIGHT].tolist() == [5, 0]
    assert line.at(1_500_000_000) == 15


@given(
    placements=st.lists(
        st.tuples(st.sampled_from([LEFT, RIGHT]), st.integers(0, 60), st.integers(1, 20)),
        max_size=8,
    ),
    cuts=st.lists(st.integers(0, 100), max_size=6),
)
def test_taking_in_pieces_hands_out_what_one_take_does(
    placements: list[tuple[int, int, int]], cuts: list[int]
) -> None:
    whole, pieces = StereoTimeline(8000, 0), StereoTimeline(8000, 0)
    for channel, at, n in placements:
        samples = np.arange(1, n + 1, dtype=np.int16) * (channel + 1)
        whole.place(channel, samples, at)
        pieces.place(channel, samples, at)
    end = 100
    taken = [pieces.take(cut) for cut in sorted(cuts)] + [pieces.take(end)]
    assert np.array_equal(np.concatenate(taken), whole.take(end))


# The sink wrapper


class Kept:
    def __init__(self) -> None:
        self.began: list[int] = []
        self.heard: list[HeardUtterance] = []


@pytest.mark.anyio
async def test_a_recorded_sink_says_what_was_heard_cut_by_a_stop() -> None:
    kept = Kept()
    recorder: Any = type("R", (), {"began": kept.began.append, "heard": kept.heard.append})()
    sink = RecordedSink(NullSink(16000, realtime=True), recorder)
    await sink.open()
    tone = (np.sin(np.arange(16000) / 5) * 8000).astype(np.int16)
    with anyio.fail_after(GUARD_S):
        await sink.write(AudioChunk(tone, 16000))  # (returns once it fits the buffer)
        assert sink.pause()
        await anyio.sleep(0.2)
        sink.resume()
        await sink.stop()  # the rest is never heard
        await sink.write(AudioChunk(tone[:1600], 8000))  # a second utterance, resampled
        await sink.drain()
    await sink.aclose()
    first, second = kept.heard
    assert len(kept.began) == 2
    assert 0 < first.heard_s < 1.0 and len(first.heard) == round(first.heard_s * 16000)
    assert first.first_played_ns is not None and first.first_played_ns >= kept.began[0]
    ((paused, resumed),) = first.pauses
    assert resumed - paused >= 0.2e9
    assert second.heard_s == pytest.approx(0.2) and len(second.samples) == 3200


def test_an_utterance_lands_where_it_played_silent_over_its_pause(tmp_path: Path) -> None:
    recording = ConversationRecording(tmp_path, "s1", {"session": "s1"})
    t0 = recording.started_ns
    voice = np.full(RATE, 4000, np.int16)  # 1 s written
    recording.began(t0 + 500_000_000)
    # Played from 0.5 s, held 1.0-1.5 s, cut after 0.8 s of it was heard.
    pause = ((t0 + 1_000_000_000, t0 + 1_500_000_000),)
    recording.heard(HeardUtterance(voice, RATE, t0 + 500_000_000, 0.8, pause))
    recording.user_frame(np.full(RATE // 10, 2000, np.int16), RATE, t0 + 300_000_000)
    recording.close()
    samples, rate = sf.read(recording.wav_path, dtype="int16")
    assert rate == RATE and samples.shape[1] == 2
    right = samples[:, RIGHT] != 0
    ms = lambda a, b: right[a * RATE // 1000 : b * RATE // 1000]  # noqa: E731
    assert not ms(0, 500).any() and ms(500, 1000).all()  # played up to the pause
    assert not ms(1000, 1500).any()  # held
    assert ms(1500, 1800).all() and not ms(1800, 3000).any()  # the rest of 0.8 s, then cut
    left = samples[:, LEFT] != 0
    assert left[RATE // 5 : 3 * RATE // 10].all() and not left[3 * RATE // 10 :].any()
    (header,) = transcript(tmp_path)
    assert header["recording"] == recording.wav_path.name and header["session"] == "s1"


def test_only_old_recordings_are_pruned(tmp_path: Path) -> None:
    old = [tmp_path / "20260101T000000Z-sold.wav", tmp_path / "20260101T000000Z-sold.jsonl"]
    mine_but_new = tmp_path / "20261130T000000Z-snew.wav"
    someone_elses = tmp_path / "notes.wav"
    for path in [*old, mine_but_new, someone_elses]:
        path.write_bytes(b"x")
    week_ago = time.time() - 8 * 86400
    for path in [*old, someone_elses]:
        os.utime(path, (week_ago, week_ago))
    assert prune(tmp_path, 7, time.time()) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [mine_but_new.name, "notes.wav"]


# Served: the page's protocol and a phone call


@pytest.mark.anyio
async def test_a_typed_session_is_recorded_with_its_transcript(tmp_path: Path) -> None:
    folder = tmp_path / "recordings"
    with FakeOpenAI(ScriptedReply.of("It is sunny in Paris today.")) as llm:
        path = recording_section(cloud_pipeline(tmp_path, llm.base_url), folder, keep_days=30)
        log: list[tuple[str, dict[str, Any]]] = []
        record = lambda event, **fields: log.append((event, fields))  # noqa: E731
        async with (
            Server([path], port=0, log=record) as server,
            connect(server.ws_url) as ws,
        ):
            await start(ws)
            await send(ws, type="user.message", text=HOSTILE)
            turn = await read_turn(ws)
        heard = turn.end["heard"]
    lines = transcript(folder)
    header, said, answered = lines
    assert header["pipeline"] == "chat" and header["transport"] == "websocket"
    assert (said["speaker"], said["text"], said["turn"]) == ("user", HOSTILE, 1)
    assert (answered["speaker"], answered["text"]) == ("assistant", heard)
    assert answered["interrupted"] is False and answered["at_s"] >= said["at_s"]
    (wav,) = folder.glob("*.wav")
    samples, rate = sf.read(wav, dtype="int16")
    assert not samples[:, LEFT].any()  # nobody spoke
    speech_s = loud(samples[:, RIGHT], rate).sum() * 0.05
    assert speech_s > 0.5  # the answer, as played
    assert [f["path"] for e, f in log if e == "recording"] == [str(wav)]


@pytest.mark.anyio
async def test_an_unwritable_folder_is_one_line_and_the_session_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with FakeOpenAI(ScriptedReply.of("Sunny.")) as llm:
        path = recording_section(cloud_pipeline(tmp_path, llm.base_url), blocker / "recordings")
        log: list[tuple[str, dict[str, Any]]] = []
        record = lambda event, **fields: log.append((event, fields))  # noqa: E731
        async with (
            Server([path], port=0, log=record) as server,
            connect(server.ws_url) as ws,
        ):
            await start(ws)
            await send(ws, type="user.message", text="Weather?")
            turn = await read_turn(ws)
    assert turn.end["heard"].strip() == "Sunny." and turn.end["error"] is None
    (failed,) = [f for e, f in log if e == "recording_failed"]
    assert "\n" not in failed["message"] and "a-file" in failed["message"]


@pytest.mark.anyio
async def test_a_call_is_recorded_as_heard_cut_where_the_caller_spoke_over_it(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "recordings"
    path = recording_section(listening_pipeline(tmp_path, "long", LONG_REPLY), folder)
    async with Server([path], port=0, log=lambda *a, **f: None) as server:
        url = server.ws_url.replace("/v1/session", "/v1/twilio")
        with anyio.fail_after(GUARD_S):
            async with twilio_call(url, parameters={"pipeline": "long"}) as call:
                await anyio.sleep(0.5)
                question = await call.say(QUESTION, silence_after_s=0.3)
                await call.wait_for(
                    lambda: (
                        sum(len(m.samples) for m in call.media_after(question.ended))
                        >= 8000 * (WARMUP_S + 0.8)
                    ),
                    GUARD_S,
                )
                onset = time.perf_counter()
                await call.say(STOP)
                await call.wait_for(lambda: call.first_clear_after(onset) is not None, GUARD_S)
                cleared = call.first_clear_after(onset)
                assert cleared is not None
                await anyio.sleep(1.0)
    (wav,) = folder.glob("*.wav")
    samples, rate = sf.read(wav, dtype="int16")
    left, right = loud(samples[:, LEFT], rate), loud(samples[:, RIGHT], rate)
    lines = transcript(folder)
    assert lines[0]["call_sid"] == call.call_sid
    user, answer, *later = lines[1:]
    assert user["speaker"] == "user" and "weather" in user["text"]
    assert answer["speaker"] == "assistant" and answer["interrupted"] is True
    assert 0 < len(answer["text"]) < len(LONG_REPLY)
    # On the recording's own timeline (0.05 s windows): the caller's question
    # on the left, then the answer on the right where it began to play, cut
    # where the caller stopped hearing it, silence until the answer to what
    # interrupted it (if that came before the hang-up).
    asked = np.flatnonzero(left)
    began = int(answer["at_s"] / 0.05)
    assert asked[0] < began and not right[:began].any()
    assert right[began : began + 3].any()  # (it plays from where the line says)
    next_answer = [line["at_s"] for line in later if line["speaker"] == "assistant"]
    until = int(next_answer[0] / 0.05) if next_answer else len(right)
    last = began + np.flatnonzero(right[began:until])[-1]
    heard_s = (last - began) * 0.05
    assert 1.0 < heard_s < len(samples) / rate  # some of it, not the 16 s sent
    assert until - last > 4  # a silence between the cut and what came next
    # What the caller heard of it ended with the clear: no more than that was recorded.
    assert heard_s <= cleared - question.ended + 0.3


# run --input


def test_run_input_is_recorded_with_its_greeting(tmp_path: Path) -> None:
    folder = tmp_path / "recordings"
    path = recording_section(listening_pipeline(tmp_path, "voice", "It is sunny."), folder)
    path.write_text(path.read_text() + '\n[conversation]\ngreeting = "Hello there."\n')
    config = load_pipeline(path).with_overrides({"sink": {"realtime": True}})
    samples, rate = sf.read(QUESTION, dtype="int16")
    wav = tmp_path / "input.wav"
    silence = np.zeros(2 * rate, dtype=np.int16)  # the greeting first, then the question
    sf.write(wav, np.concatenate([silence, samples, silence]), rate)
    printed: list[str] = []

    async def go() -> None:
        with anyio.fail_after(GUARD_S):
            await run_listening(config, input_path=wav, out=printed.append)

    anyio.run(go)
    (recorded,) = folder.glob("*.wav")
    assert f"recording to {recorded}\n" in printed
    header, greeted, asked, answered = transcript(folder)
    assert header["input"] == str(wav)
    assert (greeted["speaker"], greeted["text"].strip(), greeted["turn"]) == (
        "assistant",
        "Hello there.",
        0,
    )
    assert asked["speaker"] == "user" and "weather" in asked["text"] and asked["turn"] == 1
    assert answered["speaker"] == "assistant" and answered["text"].strip() == "It is sunny."
    assert greeted["at_s"] < 2.0 < asked["at_s"] < answered["at_s"]
    stereo, rate = sf.read(recorded, dtype="int16")
    left, right = loud(stereo[:, LEFT], rate), loud(stereo[:, RIGHT], rate)
    window = lambda s: int(s / 0.05)  # noqa: E731
    assert right[: window(1.5)].any() and not left[: window(1.5)].any()  # the greeting alone
    assert left[window(asked["at_s"]) : window(asked["at_s"]) + 10].mean() > 0.5
    assert right[window(answered["at_s"]) : window(answered["at_s"]) + 4].any()

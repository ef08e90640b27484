"""The assistant speaks first (``[conversation] greeting``): said as written or
written by the LLM, kept in the history after a user cue (providers want the
user first), interrupted like any reply — on the page's session, a phone call
and ``run --input`` — and never said again on a resumed session."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import soundfile as sf
from resume_helpers import KEY_ENV, cloud_pipeline, resumed, texts
from serve_helpers import (
    LONG_REPLY,
    TurnLog,
    listening_pipeline,
    next_event,
    read_turn,
    send,
    start,
)
from websockets.asyncio.client import connect

from voice_membrane.cli.listen import run_listening
from voice_membrane.listening.settings import EndpointSettings
from voice_membrane.pipeline.build import build_parts, session_for
from voice_membrane.pipeline.config import ConfigError, load_pipeline
from voice_membrane.pipeline.greeting import SAID_CUE
from voice_membrane.pipeline.turn import Turn
from voice_membrane.server import Server
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.fake_twilio import twilio_call
from voice_membrane.testing.script import ScriptedReply

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent
SPEECH = ROOT / "audio_fixtures" / "speech"
QUESTION = SPEECH / "phone" / "weather_paris.wav"
STOP = SPEECH / "backchannels" / "stop.wav"
GUARD_S = 120  # against a hang only: the machine is shared and loaded
WARMUP_S = EndpointSettings().echo_warmup_s
# Markup in a greeting said as written is said, not read as tags.
SAID = "Hello! You reach the <b>weather</b> desk. <thinking>Ask me anything.</thinking>"
INSTRUCTIONS = "Greet the caller in one short sentence."


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "k")


def with_conversation(path: Path, **keys: str) -> Path:
    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in keys.items())
    path.write_text(path.read_text() + f"\n[conversation]\n{lines}", encoding="utf-8")
    return path


# The pipeline file


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        ({"greeting": "Hi.", "greeting_instructions": "Greet."}, "not both"),
        ({"greeting": "   "}, "greeting is blank"),
        ({"greeting": ""}, "at least 1 character"),
        ({"greting": "Hi."}, "did you mean greeting?"),
    ],
)
def test_a_bad_conversation_section_is_one_line(
    tmp_path: Path, keys: dict[str, str], said: str
) -> None:
    path = with_conversation(cloud_pipeline(tmp_path, "http://127.0.0.1:9"), **keys)
    with pytest.raises(ConfigError) as error:
        load_pipeline(path)
    message = str(error.value)
    assert "\n" not in message and str(path) in message and said in message


# The session


async def test_a_said_greeting_is_said_as_written_and_the_history_opens_with_its_cue(
    tmp_path: Path,
) -> None:
    with FakeOpenAI(ScriptedReply.of("It is sunny.")) as llm:
        path = with_conversation(cloud_pipeline(tmp_path, llm.base_url), greeting=SAID)
        config = load_pipeline(path)
        session = session_for(config, build_parts(config))
        async with session:
            with anyio.fail_after(GUARD_S):
                greeted = await session.greet()
                assert greeted is not None and not greeted.interrupted
                assert greeted.visible_text == SAID  # not parsed: the tags are text
                assert greeted.report.end.reason == "greeting"
                assert llm.requests == []  # said, not asked for
                assert await session.greet() is None  # once a conversation
                answer = await session.turn("What is the weather?")
        assert answer.spoken_text
    (request,) = llm.requests
    assert texts(request.body) == [
        ("user", SAID_CUE),
        ("assistant", SAID),
        ("user", "What is the weather?"),
    ]


async def test_a_written_greeting_is_the_llms_answer_to_the_instructions(tmp_path: Path) -> None:
    replies = (ScriptedReply.of("Good morning, how can I help?"), ScriptedReply.of("Sunny."))
    with FakeOpenAI(*replies) as llm:
        path = cloud_pipeline(tmp_path, llm.base_url)
        config = load_pipeline(with_conversation(path, greeting_instructions=INSTRUCTIONS))
        session = session_for(config, build_parts(config))
        async with session:
            with anyio.fail_after(GUARD_S):
                greeted = await session.greet()
                assert greeted is not None
                assert greeted.spoken_text.strip() == "Good morning, how can I help?"
                await session.turn("Weather?")
    first, second = (texts(request.body) for request in llm.requests)
    assert first == [("user", INSTRUCTIONS)]  # the user speaks first, as providers want
    assert second == [
        ("user", INSTRUCTIONS),
        ("assistant", "Good morning, how can I help?"),
        ("user", "Weather?"),
    ]


async def test_a_greeting_cut_before_its_first_word_leaves_no_trace(tmp_path: Path) -> None:
    with FakeOpenAI(ScriptedReply.of("Sunny.")) as llm:
        path = with_conversation(cloud_pipeline(tmp_path, llm.base_url), greeting=SAID)
        config = load_pipeline(path)
        session = session_for(config, build_parts(config), on_turn_start=Turn.interrupt)
        async with session:
            with anyio.fail_after(GUARD_S):
                greeted = await session.greet()
                assert greeted is not None and greeted.interrupted
                assert greeted.spoken_text == ""
                assert session.history == [] and session.turns == 0
                session.on_turn_start = lambda turn: None
                await session.turn("Weather?")
    assert texts(llm.requests[0].body) == [("user", "Weather?")]


# A served session: the page's protocol


async def test_a_served_session_opens_with_its_greeting_and_an_interrupt_cuts_it(
    tmp_path: Path,
) -> None:
    with FakeOpenAI(ScriptedReply.of("Sunny.")) as llm:
        path = cloud_pipeline(tmp_path, llm.base_url)
        with_conversation(path, greeting=LONG_REPLY)
        log: list[tuple[str, dict[str, Any]]] = []
        async with (
            Server(
                [path], port=0, log=lambda event, **fields: log.append((event, fields))
            ) as server,
            connect(server.ws_url) as ws,
        ):
            await start(ws)
            first = await next_event(ws)
            assert first == {
                "type": "turn.started",
                "turn": 1,
                "text": "",
                "source": "greeting",
            }
            greeting = TurnLog([first])
            while not greeting.of("transcript.delta"):  # its first words are sent
                greeting.events.append(await next_event(ws))
            assert greeting.of("transcript.delta")[0]["turn"] == 1
            await anyio.sleep(1.5)  # a second or so of it played
            await send(ws, type="interrupt")  # (the page's stop button, or speech)
            greeting = await read_turn(ws, greeting)
            assert greeting.end["interrupted"] and greeting.end["heard"]
            assert len(greeting.end["heard"]) < len(LONG_REPLY)
            (metrics,) = greeting.of("metrics")
            assert metrics["report"]["endpoint_reason"] == "greeting"
            await send(ws, type="user.message", text="And tomorrow?")
            answer = await read_turn(ws)
            assert answer.of("turn.started")[0]["source"] == "text"
            assert answer.end["turn"] == 2 and answer.end["heard"].strip() == "Sunny."
    (request,) = llm.requests
    roles = [role for role, _ in texts(request.body)]
    assert roles == ["user", "assistant", "user"]
    assert texts(request.body)[1][1] in LONG_REPLY  # what was heard of it, not all of it
    starts = [fields for event, fields in log if event == "turn_start"]
    assert [s["source"] for s in starts] == ["greeting", "text"]


async def test_a_resumed_session_is_not_greeted_again(tmp_path: Path) -> None:
    with FakeOpenAI(ScriptedReply.of("Sunny.")) as llm:
        path = with_conversation(cloud_pipeline(tmp_path, llm.base_url), greeting="Hello.")
        async with Server([path], port=0, log=lambda *a, **f: None) as server:
            async with connect(server.ws_url) as ws:
                started = await start(ws)
                greeting = await read_turn(ws)
                assert greeting.end["heard"].strip() == "Hello."
                ws.transport.abort()
            async with connect(server.ws_url) as ws:
                await resumed(ws, started)
                await send(ws, type="user.message", text="Weather?")
                answer = await read_turn(ws)  # (a second greeting would come first)
                assert answer.of("turn.started")[0] == {
                    "type": "turn.started",
                    "turn": 2,
                    "text": "Weather?",
                    "source": "text",
                }


# A phone call


async def test_a_caller_hears_the_greeting_first_and_speaking_over_it_clears_it(
    tmp_path: Path,
) -> None:
    path = with_conversation(listening_pipeline(tmp_path, "long", "Sunny."), greeting=LONG_REPLY)
    log: list[tuple[str, dict[str, Any]]] = []
    record = lambda event, **fields: log.append((event, fields))  # noqa: E731
    async with Server([path], port=0, log=record) as server:
        url = server.ws_url.replace("/v1/session", "/v1/twilio")
        with anyio.fail_after(GUARD_S):
            async with twilio_call(url, parameters={"pipeline": "long"}) as call:
                connected = time.perf_counter()
                # The greeting plays with no word from the caller. Speech over it
                # counts once the echo warm-up has passed (as over any reply).
                await call.wait_for(
                    lambda: (
                        sum(len(m.samples) for m in call.media_after(connected))
                        >= 8000 * (WARMUP_S + 0.8)
                    ),
                    GUARD_S,
                )
                onset = time.perf_counter()
                stop = await call.say(STOP)
                await call.wait_for(lambda: call.first_clear_after(onset) is not None, 15)
                cleared = call.first_clear_after(onset)
                assert cleared is not None and cleared >= stop.started
                await call.wait_for(lambda: any(event == "turn_end" for event, _ in log), GUARD_S)
    starts = [fields for event, fields in log if event == "turn_start"]
    assert starts[0]["source"] == "greeting"
    (end, *_) = [fields for event, fields in log if event == "turn_end"]
    assert end["turn"] == 1 and end["interrupted"]
    assert end["endpoint_reason"] == "greeting"
    assert {f["action"] for e, f in log if e == "barge_in"} & {"pause", "interrupt"}


# run --input


def spoken_after(tmp_path: Path, seconds: float, speech: Path) -> Path:
    samples, rate = sf.read(speech, dtype="int16")
    silence = np.zeros(int(seconds * rate), dtype=np.int16)
    wav = tmp_path / "input.wav"
    sf.write(wav, np.concatenate([silence, samples, silence[: rate // 2]]), rate)
    return wav


@pytest.mark.parametrize("greeting", ["Hello.", LONG_REPLY])
def test_run_listening_says_the_greeting_and_speech_over_a_long_one_cuts_it(
    tmp_path: Path, greeting: str
) -> None:
    path = with_conversation(listening_pipeline(tmp_path, "voice", "Sunny."), greeting=greeting)
    # Played in real time, as on a speaker: the question comes while it plays.
    config = load_pipeline(path).with_overrides({"sink": {"realtime": True}})
    printed: list[str] = []
    wav = spoken_after(tmp_path, 2.0, QUESTION)

    async def go() -> list[Any]:
        with anyio.fail_after(GUARD_S):
            return list(await run_listening(config, input_path=wav, out=printed.append))

    turns = anyio.run(go)
    out = "".join(printed)
    (turn,) = turns  # the greeting is no user's turn
    assert "weather" in turn.heard.text
    assert out.index("listening to") < out.index(greeting[:20]) < out.index("> ")
    cut = greeting == LONG_REPLY  # the question comes 2 s in: over the long one
    assert (" [interrupted]" in out[: out.index("> ")]) == cut
    assert turn.result.report.end.barge_in == cut

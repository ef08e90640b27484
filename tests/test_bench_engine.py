"""The measuring engine's parts: a section's template filled, a column's
spread, and a report written again from saved results without measuring."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import prose, run
from benchmarks.scenario import Scenario
from benchmarks.table import Column, Table
from voice_membrane.bench.stats import Spread, span

TEMPLATE = """## A title

Took {seconds:.0f} s over {runs} runs.

{optional}

{table}
<!-- #note -->
Only {what}.
"""


@pytest.fixture
def sections(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "demo.md").write_text(TEMPLATE, encoding="utf-8")
    monkeypatch.setattr(prose, "SECTIONS", tmp_path)
    prose._fragments.cache_clear()
    yield tmp_path
    prose._fragments.cache_clear()


def test_a_template_is_filled_and_an_empty_slot_leaves_no_blank_lines(sections: Path) -> None:
    text = prose.prose("demo", seconds=12.4, runs=3, optional="", table="| a |")
    assert text == "## A title\n\nTook 12 s over 3 runs.\n\n| a |"
    assert prose.prose("demo#note", what="this") == "Only this."
    assert prose.title("demo") == "A title"
    with pytest.raises(KeyError):
        prose.prose("demo", seconds=1.0, runs=1, table="")  # a slot not given


def test_every_scenario_has_a_title_and_a_template_for_each() -> None:
    names = [scenario.name for scenario in run.SCENARIOS]
    assert len(set(names)) == len(names)
    for scenario in run.SCENARIOS:
        assert scenario.titles and all(scenario.titles)


def test_a_spread_shows_its_order_statistics_and_a_dash_for_none() -> None:
    samples = [10.0, 20.0, 30.0, 40.0]
    assert Spread(("p50", "p95", "max")).cell(samples) == "20 / 40 / 40"
    assert Spread(("median", "min"), digits=1).cell(samples) == "25.0 / 10.0"
    assert Spread(("p50",), signed=True).cell([-3.0]) == "-3"
    assert Spread(("p50",), signed=True).cell([3.0]) == "+3"
    assert Spread().cell([]) == "—"
    assert span([1.0, 2.0, 9.0], 1) == "2.0 (1.0 to 9.0)"


def test_a_table_knows_its_columns_headers_units_and_spreads() -> None:
    rows = [("a", [1.0, 2.0, 3.0]), ("b|c", [])]
    table = Table(
        [
            Column("setup", lambda r: r[0]),
            Column("first audio", lambda r: r[1], Spread(("p50", "max")), "ms"),
        ]
    )
    assert table.render(rows).split("\n") == [
        "| setup | first audio, ms p50 / max |",
        "|---|---|",
        "| a | 2 / 3 |",
        "| b\\|c | — |",
    ]


def test_a_report_is_written_again_from_saved_results_without_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    measured: list[str] = []

    def measure() -> dict[str, int]:
        measured.append("once")
        return {"answer": 42}

    def failing() -> None:
        raise ImportError("no such extra")

    scenarios = (
        Scenario("demo", ("Demo",), measure, lambda r: [f"## Demo\n\n{r['answer']}"]),
        Scenario("broken", ("Broken",), failing, lambda r: ["never"]),
    )
    monkeypatch.setattr(run, "SCENARIOS", scenarios)
    saved = run.build_report(only={"demo", "broken"}, save=tmp_path)
    again = run.build_report(only={"demo", "broken"}, load=tmp_path)
    assert measured == ["once"]  # the second report measured nothing
    assert saved == again  # a scenario that did not run says why again
    assert "## Demo\n\n42" in again
    assert "## Broken\n\nNot run: ImportError: no such extra" in again
    (tmp_path / "demo.pickle").unlink()
    gone = run.build_report(only={"demo"}, load=tmp_path)
    assert gone.startswith("## Demo\n\nNot run: NotSaved: no results of it saved in")
    assert measured == ["once"]

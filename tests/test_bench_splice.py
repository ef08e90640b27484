"""``benchmarks.run --only``: the parts run alone replace their sections of the
published report in place, a new one goes where the report's order puts it,
and nothing else changes."""

from __future__ import annotations

import pytest

from benchmarks import turns, voice
from benchmarks.run import main, splice

OLD = (
    "# Benchmarks\n\nGenerated 2026-11-01 10:00 UTC by `make bench`.\n\n"
    "## Reproduce\n\nmake bench\n\n"
    f"## {voice.VOICE_TITLE}\n\nold voice | 931\n\n### Preemptive\n\nold preempt\n\n"
    "## Barge-in by voice: speech over the reply → its audio paused\n\nbarge\n\n"
    "## Method\n\nmethod\n"
)


def test_a_part_run_alone_replaces_its_section_and_a_new_one_goes_in_order() -> None:
    new = f"## {voice.VOICE_TITLE}\n\nnew voice | 612\n\n"
    new += f"## {turns.TURNS_TITLE}\n\nturns\n"
    out = splice(OLD, new, ["voice", "turns"])
    assert "old voice" not in out and "old preempt" not in out  # (its ### went with it)
    assert out.index("new voice") < out.index("## Turn-taking") < out.index("## Barge-in")
    assert "barge\n\n## Method\n\nmethod\n" in out and "make bench" in out
    assert "Sections voice, turns (`--only`) regenerated " in out.split("## Reproduce")[0]
    # run again, in part: an earlier note keeps only the sections not run since
    again = splice(out, f"## {turns.TURNS_TITLE}\n\nturns again\n", ["turns"])
    header = again.split("## Reproduce")[0]
    assert header.count("regenerated") == 2
    assert "Sections turns (`--only`)" in header and "Sections voice (`--only`)" in header
    assert splice(again, new, ["voice", "turns"]).split("## Reproduce")[0].count("regenerated") == 1


def test_only_refuses_an_unknown_part_and_a_missing_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--only", "voices", "--output", "/nonexistent/benchmarks.md"])
    assert "unknown part(s) voices" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--only", "voice", "--output", "/nonexistent/benchmarks.md"])
    assert "needs a report to splice into" in capsys.readouterr().err
